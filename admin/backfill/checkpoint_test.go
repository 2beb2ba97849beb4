package backfill

import (
	"testing"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/localrun"
)

// TestCheckpointsAdvanceOverConfirmedBatchesOnly checks the fused run's
// checkpoint: it moves over a batch once the batch was handed over whole
// and every operation of it, and of every batch before it, was written,
// whatever the order the batcher confirms them in.
func TestCheckpointsAdvanceOverConfirmedBatchesOnly(t *testing.T) {
	const topic = "persistent://shop/ledger/events"
	batch := func(entries ...int64) []localrun.Message {
		out := make([]localrun.Message, len(entries))
		for i, e := range entries {
			out[i] = localrun.Message{Topic: topic, Ledger: 7, Entry: e}
		}
		return out
	}
	at := func(c *checkpoints) (int64, int64) {
		p, n := c.snapshot()
		return p[topic].Entry, n
	}
	c := newCheckpoints(map[string]backfillrecord.Position{topic: {Ledger: 7, Entry: 1}}, 10)
	first := c.open(batch(2, 3))
	c.submitted(first)
	c.submitted(first)
	second := c.open(batch(4, 5, 6)) // seals the first
	c.submitted(second)
	c.applied(second) // the second confirmed before the first
	if e, n := at(c); e != 1 || n != 10 {
		t.Fatalf("checkpoint at entry %d (%d events) with the first batch unwritten, want the starting one (1, 10)", e, n)
	}
	c.applied(first)
	if e, _ := at(c); e != 1 {
		t.Fatalf("checkpoint at %d with one operation of the first batch unwritten", e)
	}
	c.applied(first)
	if e, n := at(c); e != 3 || n != 12 {
		t.Fatalf("checkpoint at entry %d (%d events), want 3 (12): the second batch is not sealed yet", e, n)
	}
	third := c.open(batch(7)) // a batch without operations
	c.seal()
	if e, n := at(c); e != 7 || n != 16 || third.pending != 0 {
		t.Fatalf("checkpoint at entry %d (%d events), want 7 (16) once every batch is sealed and written", e, n)
	}
}
