package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/testenv"
)

// ledger is a throwaway tenant with a ledger namespace, as deploy creates it.
type ledger struct {
	svc    testenv.Services
	tenant string
	topic  string
	client pulsar.Client
}

func newLedger(t testing.TB, dedup bool) *ledger {
	t.Helper()
	svc := testenv.Pulsar(t)
	admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
	if err != nil {
		t.Fatalf("creating admin client: %v", err)
	}
	tenant := fmt.Sprintf("ingesttest%d", rand.Uint32())
	ns := tenant + "/ledger"
	if err := admin.Tenants().Create(utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatalf("creating tenant: %v", err)
	}
	if err := admin.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	if err := admin.Namespaces().SetDeduplicationStatus(ns, dedup); err != nil {
		t.Fatalf("setting deduplication: %v", err)
	}
	client, err := pulsar.NewClient(svc.PulsarClientOptions())
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	l := &ledger{svc: svc, tenant: tenant, topic: ingest.DefaultTopic(tenant), client: client}
	t.Cleanup(func() {
		client.Close()
		_ = admin.Topics().Delete(*mustTopic(t, l.topic), true, true)
		_ = admin.Namespaces().DeleteNamespace(ns)
		_ = admin.Tenants().Delete(tenant)
	})
	return l
}

func mustTopic(t testing.TB, name string) *utils.TopicName {
	t.Helper()
	tn, err := utils.GetTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// storageSize is the bytes the broker stores of the ledger topic.
func (l *ledger) storageSize(t testing.TB) int64 {
	t.Helper()
	admin, err := pulsaradmin.NewClient(l.svc.PulsarAdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	stats, err := admin.Topics().GetStats(*mustTopic(t, l.topic))
	if err != nil {
		t.Fatal(err)
	}
	return stats.StorageSize
}

// readAll reads the whole ledger from the start: everything that arrives
// until nothing more comes for two seconds.
func (l *ledger) readAll(t *testing.T) []string {
	t.Helper()
	reader, err := l.client.CreateReader(pulsar.ReaderOptions{Topic: l.topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("creating reader: %v", err)
	}
	defer reader.Close()
	var out []string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		msg, err := reader.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatalf("reading ledger: %v", err)
		}
		out = append(out, string(msg.Payload()))
	}
}

func (l *ledger) ingest(t *testing.T, files ...string) []ingest.FileResult {
	t.Helper()
	res, err := ingest.Run(t.Context(), ingest.Options{Services: l.svc, Tenant: l.tenant, Files: files})
	if err != nil {
		t.Fatalf("ingesting %v: %v", files, err)
	}
	return res
}

func writeLines(t *testing.T, name string, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func events(n int, tag string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"id":"%s-%d","type":"page_view","user":"u%d","time":"2026-11-01T10:00:%02dZ","url":"/p/%d"}`, tag, i, i%13, i%60, i)
	}
	return lines
}

func TestIngestRerunPublishesNothingTwice(t *testing.T) {
	l := newLedger(t, true)
	lines := events(1000, "a")
	file := writeLines(t, "a.jsonl", lines)

	first := l.ingest(t, file)[0]
	if first.Published != 1000 || first.Skipped != 0 {
		t.Fatalf("first run: %+v, want 1000 published, 0 skipped", first)
	}
	again := l.ingest(t, file)[0]
	if again.Published != 0 || again.Skipped != 1000 {
		t.Fatalf("re-run: %+v, want 0 published, 1000 skipped", again)
	}
	if got := l.readAll(t); !equal(got, lines) {
		t.Fatalf("ledger holds %d events, want the file's %d in order", len(got), len(lines))
	}
}

func TestIngestResumesAfterCrash(t *testing.T) {
	l := newLedger(t, true)
	lines := events(2600, "b")
	file := writeLines(t, "b.jsonl", lines)

	// A run that crashed after its first two batches reached the broker.
	crashed, err := ingest.Run(t.Context(), ingest.StopAfter(ingest.Options{Services: l.svc, Tenant: l.tenant, Files: []string{file}}, 1000))
	if err != nil {
		t.Fatalf("ingesting the first 1000 lines: %v", err)
	}
	if crashed[0].Published != 1000 {
		t.Fatalf("crashed run: %+v, want 1000 published", crashed[0])
	}

	res := l.ingest(t, file)[0]
	if res.Published != 1600 || res.Skipped != 1000 {
		t.Fatalf("resumed run: %+v, want 1600 published, 1000 skipped", res)
	}
	if got := l.readAll(t); !equal(got, lines) {
		t.Fatalf("ledger holds %d events, want the file's %d exactly once, in order", len(got), len(lines))
	}
}

func TestIngestSimilarFileIsNotARerun(t *testing.T) {
	l := newLedger(t, true)
	a := events(200, "c")
	// The same lines plus one: an ingest keyed by line numbers alone would
	// skip the first 200.
	b := append(append([]string{}, a...), events(1, "d")...)
	l.ingest(t, writeLines(t, "a.jsonl", a))
	res := l.ingest(t, writeLines(t, "b.jsonl", b))[0]
	if res.Published != 201 || res.Skipped != 0 {
		t.Fatalf("similar file: %+v, want 201 published, 0 skipped", res)
	}
	if got := len(l.readAll(t)); got != 401 {
		t.Fatalf("ledger holds %d events, want 401", got)
	}
}

func TestIngestStdinAndKeys(t *testing.T) {
	l := newLedger(t, true)
	lines := events(20, "e")
	lines = append(lines, `not json at all`)
	res, err := ingest.Run(t.Context(), ingest.Options{
		Services: l.svc, Tenant: l.tenant, Files: []string{"-"},
		Stdin: strings.NewReader(strings.Join(lines, "\n") + "\n\n"),
	})
	if err != nil {
		t.Fatalf("ingesting stdin: %v", err)
	}
	if res[0].Published != 21 || res[0].Blank != 1 {
		t.Fatalf("stdin: %+v, want 21 published (the malformed line too) and 1 blank", res[0])
	}
	reader, err := l.client.CreateReader(pulsar.ReaderOptions{Topic: l.topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	msg, err := reader.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if msg.Key() != "u0" || !msg.EventTime().Equal(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("first message key %q time %v, want u0 at 2026-11-01T10:00:00Z", msg.Key(), msg.EventTime())
	}
}

func TestIngestRefusals(t *testing.T) {
	t.Run("unknown tenant", func(t *testing.T) {
		svc := testenv.Pulsar(t)
		_, err := ingest.Run(t.Context(), ingest.Options{Services: svc, Tenant: "no-such-tenant", Files: []string{"x"}})
		if !errors.Is(err, ingest.ErrUnknownTenant) {
			t.Fatalf("err = %v, want ErrUnknownTenant", err)
		}
	})
	t.Run("unknown compression", func(t *testing.T) {
		svc := testenv.Pulsar(t)
		_, err := ingest.Run(t.Context(), ingest.Options{Services: svc, Tenant: "any", Files: []string{"x"}, Compression: "brotli"})
		if err == nil || !strings.Contains(err.Error(), `--compression "brotli": want none, lz4`) {
			t.Fatalf("err = %v, want one naming --compression and the choices", err)
		}
	})
	t.Run("deduplication off", func(t *testing.T) {
		l := newLedger(t, false)
		_, err := ingest.Run(t.Context(), ingest.Options{Services: l.svc, Tenant: l.tenant, Files: []string{"x"}})
		if !errors.Is(err, ingest.ErrDeduplicationOff) {
			t.Fatalf("err = %v, want ErrDeduplicationOff", err)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every event carries its ledger topic's epoch, the same as the topic's
// property; a topic deleted and created again (as after a cluster's
// metadata was wiped) gets another epoch, so that a sink can tell its
// restarted ledger ids from redeliveries.
func TestIngestStampsTheLedgerEpoch(t *testing.T) {
	l := newLedger(t, true)
	admin, err := pulsaradmin.NewClient(l.svc.PulsarAdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	epochOf := func() string {
		t.Helper()
		props, err := admin.Topics().GetProperties(*mustTopic(t, l.topic))
		if err != nil {
			t.Fatalf("reading topic properties: %v", err)
		}
		epoch := props[envelope.PropLedgerEpoch]
		if err := envelope.CheckEpoch(epoch); err != nil {
			t.Fatalf("topic epoch: %v", err)
		}
		return epoch
	}
	stamped := func() []string {
		t.Helper()
		reader, err := l.client.CreateReader(pulsar.ReaderOptions{Topic: l.topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		var epochs []string
		for reader.HasNext() {
			msg, err := reader.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			epochs = append(epochs, msg.Properties()[envelope.PropLedgerEpoch])
		}
		return epochs
	}
	l.ingest(t, writeLines(t, "first.jsonl", events(5, "a")))
	first := epochOf()
	for i, e := range stamped() {
		if e != first {
			t.Errorf("event %d carries epoch %q, the topic has %q", i, e, first)
		}
	}
	if err := admin.Topics().Delete(*mustTopic(t, l.topic), true, true); err != nil {
		t.Fatalf("deleting the ledger topic: %v", err)
	}
	l.ingest(t, writeLines(t, "second.jsonl", events(3, "b")))
	second := epochOf()
	if second == first {
		t.Fatalf("the re-created topic kept epoch %q", first)
	}
	got := stamped()
	if len(got) != 3 {
		t.Fatalf("re-created topic holds %d events, want 3", len(got))
	}
	for i, e := range got {
		if e != second {
			t.Errorf("event %d of the new incarnation carries epoch %q, want %q", i, e, second)
		}
	}
}

// The ledger is kept forever: ingest compresses its batches (LZ4 unless
// --compression says otherwise), and every reader gets the lines back as
// they were.
func TestIngestCompressesTheLedger(t *testing.T) {
	lines := events(2000, "z")
	raw := 0
	for _, l := range lines {
		raw += len(l)
	}
	stored := map[string]int64{}
	for _, compression := range []string{"none", ""} {
		l := newLedger(t, true)
		path := writeLines(t, "events.jsonl", lines)
		if _, err := ingest.Run(t.Context(), ingest.Options{Services: l.svc, Tenant: l.tenant, Files: []string{path}, Compression: compression}); err != nil {
			t.Fatalf("ingesting with compression %q: %v", compression, err)
		}
		if got := l.readAll(t); !equal(got, lines) {
			t.Fatalf("compression %q: read back %d lines, want the %d ingested, in order", compression, len(got), len(lines))
		}
		stored[compression] = l.storageSize(t)
	}
	t.Logf("%d bytes of lines stored in %d bytes without compression, %d with the default", raw, stored["none"], stored[""])
	if stored["none"] < int64(raw) || stored[""]*2 > stored["none"] {
		t.Fatalf("stored %d bytes with the default compression against %d without (lines: %d bytes): want at most half", stored[""], stored["none"], raw)
	}
}

// TestIngestStreamsStandardInput checks that lines on standard input reach
// the ledger as they come, long before the input ends.
func TestIngestStreamsStandardInput(t *testing.T) {
	l := newLedger(t, true)
	r, w := io.Pipe()
	done := make(chan error, 1)
	var res []ingest.FileResult
	go func() {
		var err error
		res, err = ingest.Run(t.Context(), ingest.Options{Services: l.svc, Tenant: l.tenant, Files: []string{"-"}, Stdin: r})
		done <- err
	}()
	reader, err := l.client.CreateReader(pulsar.ReaderOptions{Topic: l.topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	lines := events(6, "live")
	for i, line := range lines {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
		// Each line is in the ledger before the next is written, and the
		// input is still open.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		msg, err := reader.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("line %d not in the ledger 10 s after it was written (the input still open): %v", i+1, err)
		}
		if string(msg.Payload()) != line {
			t.Fatalf("ledger event %d: %q, want %q", i+1, msg.Payload(), line)
		}
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res[0].Published != int64(len(lines)) || res[0].Lines != int64(len(lines)) {
		t.Errorf("stream: %+v, want %d published", res[0], len(lines))
	}
}
