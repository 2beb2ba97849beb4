package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	pulsaradmin "github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/sirupsen/logrus"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/ledger"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
)

// bucketDir is where s3proxy's filesystem backend keeps the offload
// bucket's objects (scripts/stack: $FOLDLINE_STACK_DIR/s3/data/<bucket>).
func bucketDir() string {
	stack := os.Getenv("FOLDLINE_STACK_DIR")
	if stack == "" {
		stack = filepath.Join(testenv.RepoRoot(), ".stack")
	}
	return filepath.Join(stack, "s3", "data", "foldline-offload")
}

// testLedger is a tenant of a test's own with an ingested ledger topic.
type testLedger struct {
	tenant string
	topic  *utils.TopicName
	opts   ledger.Options
	admin  pulsaradmin.Client
	svc    services.Services
	// lines are the events in ledger order.
	lines [][]byte
}

// newTestLedger creates a tenant with a ledger namespace (retention
// forever, deduplication, the given deletion lag, no automatic offload),
// ingests events generated events in segments pieces — unloading the topic
// after each, which closes its segment (ingest batches 500 events into one
// entry, so the stack's 5000 entries per segment would take millions) —
// and purges the tenant when the test ends.
func newTestLedger(t testing.TB, name string, events, segments int, deletionLag time.Duration) *testLedger {
	t.Helper()
	svc := testenv.Pulsar(t)
	tl := &testLedger{tenant: fmt.Sprintf("fltest-%s-%d", name, time.Now().UnixNano()%1_000_000), svc: svc}
	admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	tl.admin = admin
	ctx := context.Background()
	if err := admin.Tenants().CreateWithContext(ctx, utils.TenantData{Name: tl.tenant, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatalf("creating tenant %s: %v", tl.tenant, err)
	}
	t.Cleanup(func() { tl.purge(t) })
	ns := tl.tenant + "/ledger"
	steps := []struct {
		what string
		do   func() error
	}{
		{"creating namespace", func() error { return admin.Namespaces().CreateNamespaceWithContext(ctx, ns) }},
		{"setting retention", func() error {
			return admin.Namespaces().SetRetentionWithContext(ctx, ns, utils.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1})
		}},
		{"turning on deduplication", func() error { return admin.Namespaces().SetDeduplicationStatusWithContext(ctx, ns, true) }},
		{"setting the offload policy", func() error { return setOffloadPolicy(ctx, svc, ns, offloadPolicy(deletionLag)) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s of %s: %v", s.what, ns, err)
		}
	}
	tl.topic, _ = utils.GetTopicName(ingest.DefaultTopic(tl.tenant))
	tl.opts = ledger.Options{
		Command: target.Command{
			Dir:      testenv.ShopManifestsDir(),
			Target:   target.Flags{Tenant: tl.tenant},
			Services: svc,
		},
		Wait: 3 * time.Minute,
	}

	var all bytes.Buffer
	if _, err := gen.Generate(&all, gen.Options{Events: events, Seed: 9}); err != nil {
		t.Fatalf("generating events: %v", err)
	}
	sc := bufio.NewScanner(&all)
	for sc.Scan() {
		tl.lines = append(tl.lines, bytes.Clone(sc.Bytes()))
	}
	dir := t.TempDir()
	per := (len(tl.lines) + segments - 1) / segments
	for i := 0; i < segments; i++ {
		part := tl.lines[i*per : min((i+1)*per, len(tl.lines))]
		file := filepath.Join(dir, fmt.Sprintf("part-%d.jsonl", i))
		if err := os.WriteFile(file, append(bytes.Join(part, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		tl.ingest(t, file)
	}
	return tl
}

// offloadPolicy is the local stack's offloader (scripts/stack) with the
// given deletion lag and automatic offload off.
//
// The offloaders directory is spelled "offloaders", not Pulsar's default
// "./offloaders": a broker caches the offloaders it finds per directory
// string, and one started before scripts/fetch linked the NARs into
// $PULSAR_HOME/offloaders has cached "./offloaders" as empty (the offload
// then fails with "NullLedgerOffloader") until it restarts. Both names are
// the same folder.
func offloadPolicy(deletionLag time.Duration) map[string]any {
	return map[string]any{
		"managedLedgerOffloadDriver":              "S3",
		"managedLedgerOffloadBucket":              "foldline-offload",
		"managedLedgerOffloadServiceEndpoint":     s3Endpoint(),
		"managedLedgerOffloadRegion":              "us-east-1",
		"offloadersDirectory":                     "offloaders",
		"managedLedgerOffloadDeletionLagInMillis": deletionLag.Milliseconds(),
		"managedLedgerOffloadThresholdInBytes":    -1,
		"managedLedgerOffloadThresholdInSeconds":  -1,
	}
}

// setOffloadPolicy sets a namespace's whole offload policy (the Go admin
// client sets only its fields one by one).
func setOffloadPolicy(ctx context.Context, svc services.Services, ns string, policy map[string]any) error {
	body, err := json.Marshal(policy)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.PulsarAdminURL+"/admin/v2/namespaces/"+ns+"/offloadPolicies", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := svc.AuthorizePulsar(req); err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("broker answered %s: %s", resp.Status, msg)
	}
	return nil
}

// ingest publishes one file and closes the topic's segment.
func (tl *testLedger) ingest(t testing.TB, file string) {
	t.Helper()
	ctx := context.Background()
	if _, err := ingest.Run(ctx, ingest.Options{Services: tl.svc, Tenant: tl.tenant, Files: []string{file}}); err != nil {
		t.Fatalf("ingesting %s: %v", file, err)
	}
	if err := tl.admin.Topics().UnloadWithContext(ctx, *tl.topic); err != nil {
		t.Fatalf("unloading %s to close its segment: %v", tl.topic, err)
	}
}

func (tl *testLedger) purge(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := tl.tenant + "/ledger"
	if err := tl.admin.Topics().DeleteWithContext(ctx, *tl.topic, true, true); err != nil {
		t.Logf("deleting topic %s: %v", tl.topic, err)
	}
	if err := tl.admin.Namespaces().DeleteNamespaceWithContext(ctx, ns); err != nil {
		t.Logf("deleting namespace %s: %v", ns, err)
	}
	if err := tl.admin.Tenants().DeleteWithContext(ctx, tl.tenant); err != nil {
		t.Logf("deleting tenant %s: %v", tl.tenant, err)
	}
}

func (tl *testLedger) status(t testing.TB) ledger.TopicStatus {
	t.Helper()
	report, err := ledger.Status(context.Background(), tl.opts)
	if err != nil {
		t.Fatalf("ledger status: %v", err)
	}
	if len(report.Topics) != 1 {
		t.Fatalf("ledger status lists %d topics, want 1: %+v", len(report.Topics), report.Topics)
	}
	return report.Topics[0]
}

// readAll reads the topic from its very first event with a new reader and
// returns the payloads and how long the reading took.
func (tl *testLedger) readAll(t testing.TB, want int) ([][]byte, time.Duration) {
	t.Helper()
	quiet := logrus.New()
	quiet.SetLevel(logrus.WarnLevel)
	opts := tl.svc.PulsarClientOptions()
	opts.Logger = plog.NewLoggerWithLogrus(quiet)
	client, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reader, err := client.CreateReader(pulsar.ReaderOptions{
		Topic:             tl.topic.String(),
		StartMessageID:    pulsar.EarliestMessageID(),
		ReceiverQueueSize: 2000,
	})
	if err != nil {
		t.Fatalf("creating a reader of %s: %v", tl.topic, err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var got [][]byte
	for len(got) < want {
		msg, err := reader.Next(ctx)
		if err != nil {
			t.Fatalf("reading %s after %d of %d events: %v", tl.topic, len(got), want, err)
		}
		got = append(got, msg.Payload())
	}
	return got, time.Since(start)
}

// offloadedObjects lists the bucket's objects of the given segments:
// the jclouds offloader names them <uuid>-ledger-<id> and <uuid>-ledger-<id>-index.
func offloadedObjects(t testing.TB, ledgerIDs []int64) map[int64][]string {
	t.Helper()
	entries, err := os.ReadDir(bucketDir())
	if err != nil {
		t.Fatalf("listing the offload bucket: %v", err)
	}
	found := map[int64][]string{}
	for _, e := range entries {
		for _, id := range ledgerIDs {
			name := fmt.Sprintf("-ledger-%d", id)
			if strings.HasSuffix(e.Name(), name) || strings.HasSuffix(e.Name(), name+"-index") {
				found[id] = append(found[id], e.Name())
			}
		}
	}
	return found
}

// TestOffloadMovesClosedSegmentsAndReadsStayExact ingests events into four
// segments, offloads them with `ledger offload`, checks that the S3 server
// holds the objects, that the BookKeeper copies go after the deletion lag,
// and that a new reader from the very first event gets every event in
// order.
func TestOffloadMovesClosedSegmentsAndReadsStayExact(t *testing.T) {
	const events, segments = 8000, 4
	tl := newTestLedger(t, "ledger", events, segments, 2*time.Second)

	before := tl.status(t)
	if before.Offloadable.Segments != segments || before.Offloaded.Segments != 0 {
		t.Fatalf("before offload: %d closed segments in BookKeeper and %d offloaded, want %d and 0", before.Offloadable.Segments, before.Offloaded.Segments, segments)
	}

	results, err := ledger.Offload(context.Background(), tl.opts)
	if err != nil {
		t.Fatalf("ledger offload: %v", err)
	}
	if len(results) != 1 || results[0].Offloaded != before.Offloadable {
		t.Errorf("offload moved %+v, want %+v", results, before.Offloadable)
	}
	after := tl.status(t)
	if after.Offloaded != before.Offloadable || after.Offloadable.Segments != 0 || after.OffloadStatus != "SUCCESS" {
		t.Errorf("after offload: offloaded %v, offloadable %v, status %s; want offloaded %v, nothing offloadable, SUCCESS",
			after.Offloaded, after.Offloadable, after.OffloadStatus, before.Offloadable)
	}

	ids := offloadedLedgers(t, tl)
	if len(ids) != segments {
		t.Fatalf("internal stats list %d offloaded segments, want %d", len(ids), segments)
	}
	objects := offloadedObjects(t, ids)
	for _, id := range ids {
		if len(objects[id]) != 2 {
			t.Errorf("objects of segment %d in %s: %v; want its data and its index", id, bucketDir(), objects[id])
		}
	}

	if log := brokerLog(); log == "" {
		t.Log("no broker log of the local stack: not checking that BookKeeper deleted its copies")
	} else {
		testenv.WaitFor(t, 3*time.Minute, "BookKeeper deleting the offloaded segments after the deletion lag", func() bool {
			tl.trim(t) // trimming is when the broker deletes them; it runs on its own only every 2 minutes
			return len(stillInBookKeeper(t, log, ids)) == 0
		})
	}

	again, err := ledger.Offload(context.Background(), tl.opts)
	if err != nil || len(again) != 1 || again[0].Skipped == "" {
		t.Errorf("second offload = %+v, %v; want nothing to do", again, err)
	}

	got, _ := tl.readAll(t, len(tl.lines))
	assertSameEvents(t, got, tl.lines)
}

// offloadedLedgers returns the ids of the topic's offloaded segments.
func offloadedLedgers(t testing.TB, tl *testLedger) []int64 {
	t.Helper()
	stats, err := tl.admin.Topics().GetInternalStatsWithContext(context.Background(), *tl.topic)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, l := range stats.Ledgers {
		if l.Offloaded {
			ids = append(ids, l.LedgerID)
		}
	}
	return ids
}

// brokerLog is the local stack's broker log, or "" when there is none.
func brokerLog() string {
	stack := os.Getenv("FOLDLINE_STACK_DIR")
	if stack == "" {
		stack = filepath.Join(testenv.RepoRoot(), ".stack")
	}
	path := filepath.Join(stack, "pulsar", "logs", "pulsar.out")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// stillInBookKeeper returns the segments whose BookKeeper ledger the broker
// has not deleted yet. No admin API tells (internal stats keep listing an
// offloaded segment, with or without its BookKeeper copy), but deleting a
// BookKeeper ledger deletes its metadata path /ledgers/xx/xxxx/Lxxxx, which
// the broker logs.
func stillInBookKeeper(t testing.TB, log string, ids []int64) []int64 {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("reading the broker log: %v", err)
	}
	var left []int64
	for _, id := range ids {
		if !bytes.Contains(data, []byte("Deleted path: "+ledgerPath(id)+" ")) {
			left = append(left, id)
		}
	}
	return left
}

// ledgerPath is BookKeeper's hierarchical metadata path of a ledger.
func ledgerPath(id int64) string {
	d := fmt.Sprintf("%010d", id)
	return "/ledgers/" + d[:2] + "/" + d[2:6] + "/L" + d[6:]
}

// trim asks the broker to trim the topic now (POST …/trim), which deletes
// offloaded segments from BookKeeper once the deletion lag has passed.
func (tl *testLedger) trim(t testing.TB) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tl.svc.PulsarAdminURL+"/admin/v2/"+tl.topic.GetRestPath()+"/trim", nil)
	if err == nil {
		err = tl.svc.AuthorizePulsar(req)
	}
	var resp *http.Response
	if err == nil {
		resp, err = http.DefaultClient.Do(req)
	}
	if err != nil {
		t.Logf("trimming %s: %v", tl.topic, err)
		return
	}
	resp.Body.Close()
}

// s3Endpoint is the local stack's S3 server: http://127.0.0.1:$S3_PORT
// (scripts/lib.sh, default 9000).
func s3Endpoint() string {
	port := os.Getenv("S3_PORT")
	if port == "" {
		port = "9000"
	}
	return "http://127.0.0.1:" + port
}
