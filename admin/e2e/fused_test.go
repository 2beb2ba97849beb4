package e2e

import (
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/manifest"
)

// TestFusedBackfill backfills user_activity with the fused engine, copying
// the whole path (--copy-all): the copy's path runs on this machine over the ledger (a local process per
// function, no topics, the sink's own code writing the new table), then the
// copy is deployed from the last event it read. The new table equals the
// old one, the malformed lines are in the copy's dead-letter topic as a
// deployed copy would have put them, and after the switch the deployed
// copy carries live traffic exactly.
func TestFusedBackfill(t *testing.T) {
	s := deployShop(t, "fused")
	s.ingest(t, generate(t, 5000, 23))
	s.waitForFold(t, 3*time.Minute)

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.RequireIdentical = true
	opts.Engine = backfill.EngineFused
	opts.CopyAll = true // the whole path from the ledger, validate's dead letters too
	res, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("backfilling user_activity with the fused engine: %v", err)
	}
	if res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
		t.Fatalf("diff %+v, want identical non-empty tables", res.Diff)
	}
	rejected := s.expected().Rejected
	dlq := "persistent://" + s.tenant + "/" + pipelineNS + "/validate-dlq" + manifest.ForkSuffix(res.Table)
	letters := s.deadLetters(t, dlq, len(rejected), time.Minute)
	for i, msg := range letters {
		if want := s.ledger[rejected[i]]; string(msg.Payload()) != string(want) {
			t.Errorf("dead letter %d of the fused run: %q, want line %d, %q", i, msg.Payload(), rejected[i]+1, want)
		}
	}
	// The deployed copy reads the last ledger entry the fused run read
	// once more, and dead-letters its malformed lines itself: the fused
	// run leaves those to it, so that each is there once.
	if n := s.countMessages(t, dlq); n != len(rejected) {
		t.Errorf("%s holds %d dead letters, want %d (one per malformed line)", dlq, n, len(rejected))
	}
	s.ingest(t, generate(t, 1500, 24))
	s.waitForFold(t, 3*time.Minute)

	// A second backfill replaces the fused one's copy as the old path.
	opts.Engine = backfill.EngineDeployed
	again, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("backfilling user_activity again: %v", err)
	}
	if again.OldTable != res.Table || again.Diff == nil || !again.Diff.Identical() {
		t.Fatalf("second backfill %s → %s, diff %+v; want from %s, identical", again.OldTable, again.Table, again.Diff, res.Table)
	}
}

// countMessages returns how many messages topic holds: read from the
// earliest until the broker has no more.
func (s *shop) countMessages(t *testing.T, topic string) int {
	t.Helper()
	reader := s.readFromEarliest(t, topic)
	n := 0
	for reader.HasNext() {
		if _, err := reader.Next(t.Context()); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		n++
	}
	return n
}
