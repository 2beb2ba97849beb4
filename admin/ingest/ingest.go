// Package ingest publishes JSON-lines events to a tenant's ledger topic,
// exactly once per line even across crashes and re-runs.
//
// How re-runs stay exact: the ledger namespace has broker deduplication on.
// Each file is published by a producer whose name is derived from the SHA-256
// of the file's content, and each line's sequence id is its line number, so
// the broker drops every line it already holds from that producer and answers
// it with an empty receipt, which ingest counts as skipped. Batches are cut by
// count and size only, never by time, so a re-run of the same content forms
// exactly the same batches as the crashed run: each batch is then wholly old
// or wholly new to the broker (a batch that straddled the broker's last
// sequence id could be neither accepted nor dropped). A different file has a
// different hash, hence a different producer name, so however similar its
// lines are it is never mistaken for a re-run.
package ingest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/ledgerepoch"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/progress"
	"github.com/foldline/foldline/client"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/services"
)

// Errors that decide what the CLI tells the user.
var (
	// ErrUnknownTenant: the tenant does not exist on the cluster.
	ErrUnknownTenant = errors.New("unknown tenant")
	// ErrDeduplicationOff: the ledger namespace would accept a line twice.
	ErrDeduplicationOff = errors.New("deduplication is off")
)

// Options configures one ingest run.
type Options struct {
	// Services locates Pulsar (default: services.Load()).
	Services services.Services
	// Tenant owns the ledger. Required.
	Tenant string
	// Topic is the ledger topic; default persistent://TENANT/ledger/events.
	Topic string
	// Files are JSON-lines files; "-" is standard input.
	Files []string
	// KeyField is the JSON field whose value becomes the message key
	// (the entity key); default "user".
	KeyField string
	// TimeField is the JSON field (RFC 3339) whose value becomes the
	// message's event time; default "time".
	TimeField string
	// Compression compresses the ledger's batches: none, lz4, zlib, zstd
	// or snappy; default DefaultCompression. Every Pulsar client reads
	// them, and the ledger is kept forever.
	Compression string
	// compression is Compression parsed (applyDefaults).
	compression pulsar.CompressionType
	// Stdin replaces os.Stdin for "-" (tests).
	Stdin io.Reader
	// Progress receives the progress display; nil means none.
	Progress io.Writer

	// stopAfter > 0 stops after that many lines were sent, as a crash
	// between two batches would (tests only).
	stopAfter int64
}

// FileResult says what happened to one file.
type FileResult struct {
	File      string `json:"file"`
	Producer  string `json:"producer"`
	Lines     int64  `json:"lines"`
	Published int64  `json:"published"`
	// Skipped lines were already in the ledger from an earlier run.
	Skipped int64 `json:"skipped"`
	// Blank lines are not events and are never published.
	Blank int64 `json:"blank"`
}

func (o *Options) applyDefaults() error {
	if o.Services.PulsarURL == "" {
		svc, err := services.Load()
		if err != nil {
			return err
		}
		o.Services = svc
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic(o.Tenant)
	}
	if o.KeyField == "" {
		o.KeyField = DefaultKeyField
	}
	if o.TimeField == "" {
		o.TimeField = DefaultTimeField
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Compression == "" {
		o.Compression = DefaultCompression
	}
	var err error
	if o.compression, err = pf.ParseCompression(o.Compression); err != nil {
		return fmt.Errorf("ingest: --compression %q: %w: %w", o.Compression, err, exitcode.ErrUsage)
	}
	return nil
}

// DefaultCompression is the ledger's compression unless --compression
// says otherwise. The ledger is kept forever, in BookKeeper and then in
// the offload store: with LZ4, 1 000 000 shop events (foldline gen) took
// 39.6 bytes each against 181.5 uncompressed, and a plain reader got
// through them 1.36× faster (BenchmarkLedgerCompression).
const DefaultCompression = "lz4"

// DefaultTopic is the ledger topic of a tenant when none is configured.
func DefaultTopic(tenant string) string {
	return "persistent://" + tenant + "/ledger/events"
}

// Run publishes every file in order, one after the other.
func Run(ctx context.Context, opts Options) ([]FileResult, error) {
	if err := opts.applyDefaults(); err != nil {
		return nil, err
	}
	if opts.Tenant == "" {
		return nil, errors.New("ingest: --tenant is required")
	}
	if len(opts.Files) == 0 {
		return nil, errors.New("ingest: name at least one file, or - for standard input")
	}
	if err := opts.Services.CheckPulsar(); err != nil {
		return nil, err
	}
	epoch, err := PrepareLedger(ctx, opts.Services, opts.Tenant, opts.Topic)
	if err != nil {
		return nil, err
	}
	client, err := pulsarx.NewClient(opts.Services)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	var results []FileResult
	for _, name := range opts.Files {
		res, err := ingestFile(ctx, client, opts, epoch, name)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// dedupCursor is the cursor a broker opens on a topic once deduplication is
// active there; until it exists, sequence ids are not yet checked.
const dedupCursor = "pulsar.dedup"

// PrepareLedger refuses an unknown tenant or a namespace that would not
// deduplicate a re-run, creates the ledger topic if it is missing, and waits
// until the broker has deduplication active on it: a producer that connects
// earlier is not deduplicated and would not learn its last sequence id. It
// returns the topic's epoch (package ledgerepoch), which every event
// published there must carry.
func PrepareLedger(ctx context.Context, svc services.Services, tenant, ledgerTopic string) (string, error) {
	admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
	if err != nil {
		return "", fmt.Errorf("creating admin client for %s: %w", svc.PulsarAdminURL, err)
	}
	tenants, err := admin.Tenants().ListWithContext(ctx)
	if err != nil {
		return "", fmt.Errorf("listing tenants: %w", err)
	}
	if !slices.Contains(tenants, tenant) {
		return "", fmt.Errorf("%w %q: deploy its manifests first with foldline deploy", ErrUnknownTenant, tenant)
	}
	topic, err := utils.GetTopicName(ledgerTopic)
	if err != nil {
		return "", fmt.Errorf("parsing ledger topic %q: %w", ledgerTopic, err)
	}
	ns, err := utils.GetNameSpaceName(topic.GetTenant(), topic.GetNamespace())
	if err != nil {
		return "", fmt.Errorf("parsing namespace of %q: %w", ledgerTopic, err)
	}
	policies, err := admin.Namespaces().GetPoliciesWithContext(ctx, ns.String())
	if err != nil {
		return "", fmt.Errorf("reading policies of namespace %s (does it exist? deploy the tenant manifest with foldline deploy): %w", ns, err)
	}
	if policies.DeduplicationEnabled == nil || !*policies.DeduplicationEnabled {
		return "", fmt.Errorf("%w for namespace %s, so a re-run could publish events twice: set deduplication: true in the tenant manifest and run foldline deploy", ErrDeduplicationOff, ns)
	}
	partitioned, plain, err := admin.Topics().ListWithContext(ctx, *ns)
	if err != nil {
		return "", fmt.Errorf("listing topics of %s: %w", ns, err)
	}
	if !slices.Contains(plain, topic.String()) && !slices.Contains(partitioned, topic.String()) {
		if err := createTopic(ctx, admin, topic); err != nil {
			return "", err
		}
	}
	epoch, err := ledgerepoch.Ensure(ctx, admin.Topics(), *topic)
	if err != nil {
		return "", err
	}
	// Deduplication runs per topic the broker stores: each partition of a
	// partitioned ledger.
	stored := []utils.TopicName{*topic}
	meta, err := admin.Topics().GetMetadataWithContext(ctx, *topic)
	if err != nil && !pulsarx.IsNotFound(err) {
		return "", fmt.Errorf("reading partitions of %s: %w", topic, err)
	}
	if err == nil && meta.Partitions > 0 {
		stored = stored[:0]
		for i := range meta.Partitions {
			part, err := topic.GetPartition(i)
			if err != nil {
				return "", fmt.Errorf("naming partition %d of %s: %w", i, topic, err)
			}
			stored = append(stored, *part)
		}
	}
	for _, t := range stored {
		if err := awaitDeduplication(ctx, admin, t); err != nil {
			return "", err
		}
	}
	return epoch, nil
}

// awaitDeduplication waits until the broker deduplicates topic (a stored
// topic: a partition, or a topic that is not partitioned).
func awaitDeduplication(ctx context.Context, admin pulsaradmin.Client, topic utils.TopicName) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		stats, err := admin.Topics().GetInternalStatsWithContext(ctx, topic)
		if err == nil {
			if _, ok := stats.Cursors[dedupCursor]; ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for deduplication to become active on %s: still inactive after 60s (last error: %v)", topic.String(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for deduplication on %s: %w", topic.String(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createTopic creates a non-partitioned topic with a fresh epoch, retrying for a while when the
// broker has not yet taken ownership of a new namespace's bundle (412) or is
// busy (503).
func createTopic(ctx context.Context, admin pulsaradmin.Client, topic *utils.TopicName) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := admin.Topics().CreateWithPropertiesWithContext(ctx, *topic, 0, ledgerepoch.Properties(time.Now()))
		code := pulsarx.StatusCode(err)
		if err == nil || code == http.StatusConflict {
			return nil
		}
		if (code != http.StatusPreconditionFailed && code != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			return fmt.Errorf("creating ledger topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("creating ledger topic %s: %w", topic, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ContentID hashes a file's content: the stable identity of an ingest.
func ContentID(path string) (id string, lines int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	for {
		n, rerr := r.Read(buf)
		h.Write(buf[:n])
		lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", 0, fmt.Errorf("reading %s: %w", path, rerr)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], lines, nil
}

// Batching of the ledger producer: batches close on count or size only.
const (
	batchMessages = 500
	batchBytes    = 4 << 20
)

func ingestFile(ctx context.Context, client pulsar.Client, opts Options, epoch, name string) (FileResult, error) {
	if name == "-" {
		return ingestStream(ctx, client, opts, epoch)
	}
	path := name
	id, total, err := ContentID(path)
	if err != nil {
		return FileResult{}, err
	}
	res := FileResult{File: name, Producer: "foldline-ingest-" + id}
	producer, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic:                   opts.Topic,
		Name:                    res.Producer,
		SendTimeout:             -1, // retry until the broker answers: a line is never dropped
		BatchingMaxMessages:     batchMessages,
		BatchingMaxSize:         batchBytes,
		BatchingMaxPublishDelay: 365 * 24 * time.Hour, // never cut a batch by time
		MaxPendingMessages:      8 * batchMessages,
		CompressionType:         opts.compression,
	})
	if err != nil {
		return res, fmt.Errorf("creating producer %s on %s: %w", res.Producer, opts.Topic, err)
	}
	defer producer.Close()

	f, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("opening %s: %w", name, err)
	}
	defer f.Close()

	var bar *progress.Bar
	if opts.Progress != nil {
		bar = progress.New(opts.Progress, "ingest "+name, "ev", total)
	}
	var (
		mu                 sync.Mutex
		published, skipped int64
		sendErr            error
	)
	onReceipt := func(seq int64) func(pulsar.MessageID, *pulsar.ProducerMessage, error) {
		return func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if sendErr == nil {
					sendErr = fmt.Errorf("publishing line %d of %s: %w", seq, name, err)
				}
			case id.LedgerID() < 0: // the broker's answer to a duplicate
				skipped++
			default:
				published++
			}
		}
	}
	// Every event carries the ledger's epoch; the producer only reads the
	// map, so all messages share it.
	props := map[string]string{envelope.PropLedgerEpoch: epoch}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var lineNo, sent int64
	for sc.Scan() {
		lineNo++
		res.Lines++
		if bar != nil {
			bar.Set(lineNo)
		}
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			res.Blank++
			continue
		}
		if opts.stopAfter > 0 && sent == opts.stopAfter {
			break
		}
		seq := lineNo
		msg := &pulsar.ProducerMessage{Payload: bytes.Clone(line), SequenceID: &seq, Properties: props}
		msg.Key, msg.EventTime = keyAndTime(line, opts.KeyField, opts.TimeField)
		producer.SendAsync(ctx, msg, onReceipt(seq))
		sent++
		mu.Lock()
		failed := sendErr
		mu.Unlock()
		if failed != nil {
			return res, failed
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("reading %s at line %d: %w", name, lineNo+1, err)
	}
	if err := producer.FlushWithCtx(ctx); err != nil {
		return res, fmt.Errorf("flushing %s: %w", name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	res.Published, res.Skipped = published, skipped
	if sendErr != nil {
		return res, sendErr
	}
	if bar != nil {
		bar.Finish()
	}
	return res, nil
}

// keyAndTime reads the entity key and event time of a line, as a live
// producer does (package client). A line that is not a JSON object still
// goes to the ledger (without key and time): the validating function
// dead-letters it with the reason, so nothing is lost.
func keyAndTime(line []byte, keyField, timeField string) (string, time.Time) {
	f, _ := client.Fields(line, "", keyField, timeField)
	return f.Key, f.Time
}

// streamDelay is the longest a line read from a stream waits for others
// to share its batch.
const streamDelay = 10 * time.Millisecond

// ingestStream publishes standard input line by line as the lines come,
// each in a batch within streamDelay, until it ends. Its content is not
// known before it ends, so it is not published under a producer named by
// its content, and the broker does not recognise a stream published again:
// each event then counts once by its id (a tenant whose manifest names its
// eventId), as with any live producer (package client).
func ingestStream(ctx context.Context, pc pulsar.Client, opts Options, epoch string) (FileResult, error) {
	res := FileResult{File: "-"}
	producer, err := pc.CreateProducer(pulsar.ProducerOptions{
		Topic:                   opts.Topic,
		SendTimeout:             -1,
		BatchingMaxMessages:     batchMessages,
		BatchingMaxSize:         batchBytes,
		BatchingMaxPublishDelay: streamDelay,
		MaxPendingMessages:      8 * batchMessages,
		CompressionType:         opts.compression,
	})
	if err != nil {
		return res, fmt.Errorf("creating a producer on %s: %w", opts.Topic, err)
	}
	defer producer.Close()
	res.Producer = producer.Name()
	var bar *progress.Bar
	if opts.Progress != nil {
		bar = progress.New(opts.Progress, "ingest -", "ev", 0)
	}
	var (
		mu        sync.Mutex
		published int64
		sendErr   error
	)
	props := map[string]string{envelope.PropLedgerEpoch: epoch}
	r := bufio.NewReaderSize(opts.Stdin, 64*1024)
	for lineNo := int64(1); ; lineNo++ {
		line, readErr := r.ReadBytes('\n')
		if len(line) > 0 {
			res.Lines++
			if len(bytes.TrimSpace(line)) == 0 {
				res.Blank++
			} else {
				line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
				msg := &pulsar.ProducerMessage{Payload: line, Properties: props}
				msg.Key, msg.EventTime = keyAndTime(line, opts.KeyField, opts.TimeField)
				n := lineNo
				producer.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil && sendErr == nil {
						sendErr = fmt.Errorf("publishing line %d of standard input: %w", n, err)
					} else if err == nil {
						published++
					}
				})
			}
			if bar != nil {
				bar.Set(res.Lines)
			}
		}
		if readErr == io.EOF {
			break
		}
		if readErr != nil {
			return res, fmt.Errorf("reading standard input at line %d: %w", lineNo, readErr)
		}
		mu.Lock()
		failed := sendErr
		mu.Unlock()
		if failed != nil {
			return res, failed
		}
	}
	if err := producer.FlushWithCtx(ctx); err != nil {
		return res, fmt.Errorf("flushing standard input: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	res.Published = published
	if sendErr != nil {
		return res, sendErr
	}
	if bar != nil {
		bar.Finish()
	}
	return res, nil
}
