package backfill

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/localrun"
)

// checkpoints follows which ledger events of a fused run are written for
// good. The run hands its batches of ledger events to the sink's batcher
// in ledger order, and the batcher confirms their view operations out of
// order; a batch is confirmed once it has been handed over whole (sealed)
// and each of its operations was written, and the checkpoint is the last
// event of each ledger topic (partition) of the confirmed batches that
// follow each other from the first. Everything up to it is in the table:
// a run resumed there reads its entries again, which the sink skips as
// applied.
//
// A path with a stateful function has its keys' states in the run's
// memory: its checkpoint (gated) moves only where the run exported them
// (exported) and saved them after every operation before (saved), so that
// a resumed run starts from states that have folded exactly the events
// before it.
type checkpoints struct {
	mu sync.Mutex
	// marks are the batches handed over and not yet confirmed, oldest
	// first.
	marks     []*batchMark
	confirmed map[string]backfillrecord.Position
	events    int64
	// gated: the checkpoint is the last one saved, not confirmed.
	gated bool
	saved stateCheckpoint
	// exports counts the exports begun and not yet saved (beginExport);
	// due receives each once every operation before it is confirmed.
	exports int
	due     chan stateCheckpoint
}

// batchMark is one batch of ledger events on its way to the table, or the
// states exported after the batches before it (states set).
type batchMark struct {
	pending int
	sealed  bool
	last    map[string]backfillrecord.Position
	events  int64
	states  localrun.Exported
}

// stateCheckpoint is a checkpoint of a gated run, with the states to save
// before it is one.
type stateCheckpoint struct {
	positions map[string]backfillrecord.Position
	events    int64
	states    localrun.Exported
}

// newCheckpoints starts from a checkpoint (none for a first run); gated
// for a path with a stateful function.
func newCheckpoints(from map[string]backfillrecord.Position, events int64, gated bool) *checkpoints {
	c := &checkpoints{confirmed: maps.Clone(from), events: events, gated: gated, due: make(chan stateCheckpoint, 1)}
	if c.confirmed == nil {
		c.confirmed = map[string]backfillrecord.Position{}
	}
	c.saved = stateCheckpoint{positions: maps.Clone(c.confirmed), events: events}
	return c
}

// exported seals the batch handed over before and adds the states the
// path exported after it: once every operation before them is confirmed
// they come out of due, to be saved.
func (c *checkpoints) exported(states localrun.Exported) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.marks); n > 0 {
		c.marks[n-1].sealed = true
	}
	c.marks = append(c.marks, &batchMark{sealed: true, states: states})
	c.advance()
}

// beginExport reports whether the run may ask the path for its states now,
// and if so counts the export as on its way: one at a time is, until its
// states are saved (savedAt).
func (c *checkpoints) beginExport() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exports > 0 {
		return false
	}
	c.exports++
	return true
}

// savedAt makes sc, whose states are saved, the checkpoint.
func (c *checkpoints) savedAt(sc stateCheckpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.saved = stateCheckpoint{positions: sc.positions, events: sc.events}
	c.exports--
}

// allSaved makes everything confirmed the checkpoint: the run saved its
// states at its end.
func (c *checkpoints) allSaved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.saved = stateCheckpoint{positions: maps.Clone(c.confirmed), events: c.events}
}

// open seals the batch handed over before and opens one for batch, whose
// operations follow (submitted, applied).
func (c *checkpoints) open(batch []localrun.Message) *batchMark {
	m := &batchMark{last: map[string]backfillrecord.Position{}, events: int64(len(batch))}
	for _, e := range batch {
		m.last[e.Topic] = backfillrecord.Position{Ledger: e.Ledger, Entry: e.Entry, Batch: e.Batch}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.marks); n > 0 {
		c.marks[n-1].sealed = true
	}
	c.marks = append(c.marks, m)
	c.advance()
	return m
}

// seal seals the last batch: the run is over.
func (c *checkpoints) seal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.marks); n > 0 {
		c.marks[n-1].sealed = true
	}
	c.advance()
}

// submitted counts one more operation of m handed to the batcher.
func (c *checkpoints) submitted(m *batchMark) {
	c.mu.Lock()
	m.pending++
	c.mu.Unlock()
}

// applied counts one operation of m written.
func (c *checkpoints) applied(m *batchMark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.pending--
	c.advance()
}

// advance moves the checkpoint over the confirmed batches at the front,
// and hands the exports among them to due. One export at a time is on its
// way (see beginExport), so due, of one, has room.
func (c *checkpoints) advance() {
	for len(c.marks) > 0 && c.marks[0].sealed && c.marks[0].pending == 0 {
		if st := c.marks[0].states; st != nil {
			c.due <- stateCheckpoint{positions: maps.Clone(c.confirmed), events: c.events, states: st}
		}
		maps.Copy(c.confirmed, c.marks[0].last)
		c.events += c.marks[0].events
		c.marks[0] = nil
		c.marks = c.marks[1:]
	}
}

// snapshot returns the checkpoint.
func (c *checkpoints) snapshot() (map[string]backfillrecord.Position, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gated {
		return maps.Clone(c.saved.positions), c.saved.events
	}
	return maps.Clone(c.confirmed), c.events
}

// ErrTakenOver is the error of a fused run whose record changed under it:
// another foldline backfill resumed it, or --abort removed it.
var ErrTakenOver = errors.New("the backfill's record changed under its fused run")

// defaultCheckpointEvery is how often a fused run writes its checkpoint
// and heartbeat (Options.Checkpoint).
const defaultCheckpointEvery = 2 * time.Second

// defaultExportEvery is how often a fused run whose path has a stateful
// function saves its keys' states, and so moves its checkpoint, unless
// Options.Checkpoint says: each save writes every key changed since the
// last, a cost the heartbeat (defaultCheckpointEvery) does not have.
const defaultExportEvery = 10 * time.Second

// checkpointLoop writes rec's checkpoint (cp) and heartbeat every
// interval, the dead letters of the events it covers published first,
// until stop is called; a record changed under the run (ErrTakenOver)
// stops it through fail.
func (e *env) checkpointLoop(ctx context.Context, every time.Duration, rec *backfillrecord.Record, cp *checkpoints, letters *deadLetters, fail func(error)) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := e.writeCheckpoint(ctx, rec, cp, letters, false); err != nil {
				if errors.Is(err, ErrTakenOver) {
					fail(err)
					return
				}
				// A write that failed is tried at the next tick; the
				// heartbeat lapses only if they keep failing.
				continue
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// writeCheckpoint publishes the dead letters of the events cp covers, then
// writes cp into rec (with done, the run's end) as a compare-and-set on
// the record the run last wrote.
func (e *env) writeCheckpoint(ctx context.Context, rec *backfillrecord.Record, cp *checkpoints, letters *deadLetters, done bool) error {
	positions, events := cp.snapshot()
	if letters != nil {
		if err := letters.publishBefore(ctx, positions); err != nil {
			return err
		}
	}
	next := *rec
	fused := *rec.Fused
	fused.Positions, fused.Events, fused.Heartbeat, fused.Done = positions, events, time.Now().UTC(), done
	next.Fused = &fused
	applied, err := e.store.Replace(ctx, &next)
	if err != nil {
		return err
	}
	if !applied {
		return fmt.Errorf("writing the checkpoint of the fused backfill of %s: %w (resumed by another foldline backfill, or aborted)", rec.View, ErrTakenOver)
	}
	*rec = next
	return nil
}
