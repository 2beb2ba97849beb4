package backfill

import (
	"testing"

	"github.com/foldline/foldline/functions/keyed"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/localrun"
)

// topic is the ledger topic of the checkpoints' tests.
const topic = "persistent://shop/ledger/events"

// batch is a batch of one event of each entry of ledger 7 of topic.
func batch(entries ...int64) []localrun.Message {
	out := make([]localrun.Message, len(entries))
	for i, e := range entries {
		out[i] = localrun.Message{Topic: topic, Ledger: 7, Entry: e}
	}
	return out
}

// at returns the entry of topic and the events of c's checkpoint.
func at(c *checkpoints) (int64, int64) {
	p, n := c.snapshot()
	return p[topic].Entry, n
}

// TestCheckpointsAdvanceOverConfirmedBatchesOnly checks the fused run's
// checkpoint: it moves over a batch once the batch was handed over whole
// and every operation of it, and of every batch before it, was written,
// whatever the order the batcher confirms them in.
func TestCheckpointsAdvanceOverConfirmedBatchesOnly(t *testing.T) {
	c := newCheckpoints(map[string]backfillrecord.Position{topic: {Ledger: 7, Entry: 1}}, 10, false)
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

// TestGatedCheckpointsMoveWhereStatesAreSaved checks the checkpoint of a
// path with a stateful function: the states exported after a batch come
// out (due) once every operation before them is written, one export at a
// time, and the checkpoint moves to them only once they are saved.
func TestGatedCheckpointsMoveWhereStatesAreSaved(t *testing.T) {
	c := newCheckpoints(map[string]backfillrecord.Position{topic: {Ledger: 7, Entry: 1}}, 10, true)
	first := c.open(batch(2, 3))
	c.submitted(first)
	if !c.beginExport() || c.beginExport() {
		t.Fatal("beginExport: want one export at a time")
	}
	states := localrun.Exported{"dedup": {"u#001": keyed.Snapshot{Applied: 2}}}
	c.exported(states) // seals the first batch
	second := c.open(batch(4))
	c.seal()
	select {
	case sc := <-c.due:
		t.Fatalf("states due (%v) with an operation before them unwritten", sc)
	default:
	}
	c.applied(first)
	var sc stateCheckpoint
	select {
	case sc = <-c.due:
	default:
		t.Fatal("no states due once every operation before them is written")
	}
	if sc.positions[topic].Entry != 3 || sc.events != 12 || sc.states["dedup"]["u#001"].Applied != 2 {
		t.Fatalf("due %+v, want the states at entry 3 (12 events)", sc)
	}
	if e, n := at(c); e != 1 || n != 10 || second.pending != 0 {
		t.Fatalf("checkpoint at entry %d (%d events) before the states are saved, want the starting one (1, 10)", e, n)
	}
	c.savedAt(sc)
	if e, n := at(c); e != 3 || n != 12 {
		t.Fatalf("checkpoint at entry %d (%d events) once saved, want 3 (12): not past the states", e, n)
	}
	if !c.beginExport() {
		t.Fatal("no export may begin once the last one is saved")
	}
	c.allSaved()
	if e, n := at(c); e != 4 || n != 13 {
		t.Fatalf("checkpoint at entry %d (%d events) once all is saved, want 4 (13)", e, n)
	}
}
