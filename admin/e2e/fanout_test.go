package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/functions/examples/fanout"
	"github.com/foldline/foldline/internal/testenv"
)

// fanoutManifests are the manifests of the fanout test pipeline
// (functions/examples/fanout), file by file:
//
//	ledger/events ─► split ─► parts ─► tally ─► totals-ops ─► sink ─► totals
var fanoutManifests = map[string]string{
	"tenant.yaml": `kind: Tenant
name: fanout
namespaces:
  - name: ledger
    retention: {timeMinutes: -1, sizeMB: -1}
    deduplication: true
  - name: pipeline
    retention: {timeMinutes: -1, sizeMB: -1}
    deduplication: true
ledger:
  - name: persistent://fanout/ledger/events
`,
	"pipeline.yaml": `kind: Pipeline
name: fanout
functions:
  - config: functions/split.yaml
    binary: github.com/foldline/foldline/functions/examples/fanout/cmd/split
  - config: functions/tally.yaml
    binary: github.com/foldline/foldline/functions/examples/fanout/cmd/tally
`,
	"functions/split.yaml": fanoutFunction("split", "persistent://fanout/ledger/events", "persistent://fanout/pipeline/parts"),
	"functions/tally.yaml": fanoutFunction("tally", "persistent://fanout/pipeline/parts", "persistent://fanout/pipeline/totals-ops"),
	"views/totals.yaml": `kind: View
name: ` + fanout.View + `
description: per key, the sum and count of the fanned-out amounts (the fan-out test)
version: 1
key:
  - {name: ` + fanout.ColKey + `, type: text}
columns:
  - {name: ` + fanout.ColTotal + `, type: bigint, merge: add}
  - {name: ` + fanout.ColOps + `, type: bigint, merge: add}
sink:
  input: persistent://fanout/pipeline/totals-ops
  parallelism: 1
  userConfig:
    deadLetterTopic: persistent://fanout/pipeline/totals-sink-dlq
    batch_size: 100
    consistency: LOCAL_QUORUM
`,
}

// fanoutFunction is the Pulsar function config of one stage of the fanout
// pipeline, in the shop's shape.
func fanoutFunction(name, input, output string) string {
	return `tenant: fanout
namespace: pipeline
name: ` + name + `
runtime: GO
inputs:
  - ` + input + `
output: ` + output + `
subName: ` + name + `
subscriptionPosition: Earliest
cleanupSubscription: true
parallelism: 1
processingGuarantees: ATLEAST_ONCE
autoAck: true
forwardSourceMessageProperty: true
userConfig:
  subscriptionType: key_shared
  deadLetterTopic: persistent://fanout/pipeline/` + name + `-dlq
  maxRetries: 3
  retryBackoffMs: 200
`
}

// writeFanoutManifests writes fanoutManifests into a temporary directory.
func writeFanoutManifests(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range fanoutManifests {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fanoutRow is one row of view totals.
type fanoutRow struct{ Total, Ops int64 }

// fanoutEvents makes n ledger events of the fanout pipeline on keys keys,
// with amounts 1 to 9 drawn from seed, and their fold: each event of amount
// a adds 1111·a to its key's total and 4 to its ops. The fold is computed
// here from the events alone, not by running the transformations.
func fanoutEvents(n, keys int, seed uint64) ([][]byte, map[string]fanoutRow) {
	rng := rand.New(rand.NewPCG(seed, 0))
	start := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	lines := make([][]byte, n)
	want := map[string]fanoutRow{}
	for i := range lines {
		key := fmt.Sprintf("k%02d", rng.IntN(keys))
		amount := int64(1 + rng.IntN(9))
		lines[i] = fmt.Appendf(nil, `{"id":"f-%d","key":%q,"time":%q,"amount":%d}`,
			i, key, start.Add(time.Duration(i)*time.Second).Format(time.RFC3339), amount)
		row := want[key]
		row.Total += 1111 * amount
		row.Ops += 4
		want[key] = row
	}
	return lines, want
}

// ingestFanout publishes lines to the tenant's ledger, keyed by "key".
func (s *shop) ingestFanout(t *testing.T, lines [][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("fanout-%d.jsonl", len(s.ledger)))
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ingest.Run(t.Context(), ingest.Options{Services: s.svc, Tenant: s.tenant, Files: []string{path}, KeyField: "key"})
	if err != nil {
		t.Fatalf("ingesting %d events: %v", len(lines), err)
	}
	if res[0].Published != int64(len(lines)) {
		t.Fatalf("ingest published %d of %d events", res[0].Published, len(lines))
	}
	s.ledger = append(s.ledger, lines...)
}

// fanoutTable reads view totals's active table, skipping deleted rows.
func (s *shop) fanoutTable() (map[string]fanoutRow, error) {
	table, err := s.activeTable(fanout.View)
	if err != nil {
		return nil, err
	}
	rows := map[string]fanoutRow{}
	iter := s.session.Query(`SELECT key, total, ops, fl_deleted FROM ` + s.keyspace + `.` + table).Iter()
	var (
		key     string
		row     fanoutRow
		deleted bool
	)
	for iter.Scan(&key, &row.Total, &row.Ops, &deleted) {
		if !deleted {
			rows[key] = row
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	return rows, nil
}

// fanoutDiff describes how got differs from want, a few rows at most. A
// row's total divided by its expected total tells which outputs went
// missing: 1/1111 of it when only the first of each event's four
// operations applied (all four shared one position), 11/1111 when
// split's two records were told apart but tally's two operations were not.
func fanoutDiff(got, want map[string]fanoutRow) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("row %s missing, want %+v", k, want[k]))
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("row %s = %+v, want %+v (total ×%.4f)", k, g, want[k], float64(g.Total)/float64(want[k].Total)))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("row %s unexpected", k))
		}
	}
	return strings.Join(out[:min(len(out), 8)], "\n")
}

// waitForFanout polls view totals until it equals want.
func (s *shop) waitForFanout(t *testing.T, want map[string]fanoutRow, timeout time.Duration) {
	t.Helper()
	last := "not read yet"
	defer func() {
		if t.Failed() {
			t.Logf("view totals differs from the fold of %d events:\n%s", len(s.ledger), last)
		}
	}()
	testenv.WaitFor(t, timeout, fmt.Sprintf("view totals to equal the fold of %d events", len(s.ledger)), func() bool {
		got, err := s.fanoutTable()
		if err != nil {
			last = err.Error()
			return false
		}
		last = fanoutDiff(got, want)
		return last == ""
	})
}

// TestFanOut pushes a fan-out through real stages: every ledger event goes
// through split (two records) and tally (two operations per record), so
// that four operations of one event reach the same row of view totals, with
// origin positions P/0/0, P/0/1, P/1/0 and P/1/1 under the event's position
// P. The table must equal the fold of the ledger computed here: 1111·a per
// event of amount a in total, 4 in ops.
//
// Why this fails if the outputs of one input shared a position: the sink
// keeps, per row and origin partition, the last position it applied, and
// skips any operation at or before it as a redelivery. Were the four
// operations all at P, the first would apply and the other three be skipped
// (total Σa instead of 1111·Σa, ops 1 per event instead of 4); were only one
// stage's outputs told apart, a tenth or a hundredth of the total would
// still go missing. Every key gets many events, so no row can be right by
// chance.
//
// Midway tally and the sink are killed (the worker restarts them, and
// unacknowledged inputs are redelivered); at the end every record of the
// parts topic is published again, so that tally emits each fanned
// operation a second time with the position it had: the sink must skip all
// of those and the table must not move.
func TestFanOut(t *testing.T) {
	s := deployShopFrom(t, "fanout", writeFanoutManifests(t))
	events, want := fanoutEvents(400, 12, 31)
	if len(want) < 2 {
		t.Fatalf("the events cover %d keys", len(want))
	}

	s.ingestFanout(t, events[:200])
	s.kill(t, "tally")
	s.kill(t, fanout.View+"_v1-sink")
	s.ingestFanout(t, events[200:])
	s.waitForFanout(t, want, 45*time.Second)

	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	defer client.Close()
	parts := "persistent://" + s.tenant + "/" + pipelineNS + "/parts"
	n := republish(t, client, parts)
	if n != 2*len(events) {
		t.Fatalf("parts holds %d records, want 2 per event: %d", n, 2*len(events))
	}
	s.waitForBacklog(t, parts, "tally")
	s.waitForBacklog(t, "persistent://"+s.tenant+"/"+pipelineNS+"/totals-ops", fanout.View+"_v1-sink")
	got, err := s.fanoutTable()
	if err != nil {
		t.Fatal(err)
	}
	if d := fanoutDiff(got, want); d != "" {
		t.Fatalf("republished records changed view totals:\n%s", d)
	}
	report, err := status.Get(t.Context(), status.Options{Command: target.Command{Dir: s.opts.Dir, Target: s.opts.Target, Services: s.svc}})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(report.Stages, func(st status.StageStatus) bool { return st.Name == fanout.View+"_v1-sink" })
	if i < 0 || report.Stages[i].SinkTotals == nil || report.Stages[i].SinkTotals.Skipped < int64(2*n) {
		t.Fatalf("status of the sink %+v: want at least the %d operations of the republished records skipped", report.Stages, 2*n)
	}
	t.Logf("view totals equals the fold of %d events on %d keys; the %d operations of %d republished records were skipped (sink totals %+v)",
		len(events), len(want), 2*n, n, *report.Stages[i].SinkTotals)
}
