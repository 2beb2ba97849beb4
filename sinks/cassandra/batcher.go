package cassandra

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// ApplyFunc applies one batch; Applier.Apply is one.
type ApplyFunc func(ctx context.Context, ops []Op) Result

// Batcher turns operations submitted one at a time, by concurrent callers,
// into batches for an ApplyFunc, and tells each caller when Cassandra has
// confirmed its operation. It exists because the runtime hands the sink one
// message per handler call and acknowledges the message when the call
// returns: a caller blocks in Submit until its batch is applied.
//
// A batch is flushed when it holds BatchSize operations, when every caller
// currently waiting in Submit is in it (no one else can add to it, so
// waiting longer only adds latency; this also makes a runtime that calls the
// handler one message at a time flush at once), or when Linger has passed
// since its first operation. While one batch is applied the next one fills,
// and at most two batches are held in memory.
type Batcher struct {
	apply   ApplyFunc
	size    int
	linger  time.Duration
	queue   chan pending
	waiting atomic.Int64
}

type pending struct {
	op   Op
	done chan error
}

// NewBatcher returns a Batcher; Run must be running for Submit to return.
func NewBatcher(apply ApplyFunc, size int, linger time.Duration) *Batcher {
	return &Batcher{apply: apply, size: size, linger: linger, queue: make(chan pending, size)}
}

// Submit queues op and waits until its batch is applied. It returns nil when
// Cassandra holds the operation's effect, an error wrapping ErrRejected when
// it can never apply, or an error when ctx ends first (the operation may
// still be applied later; redelivery then finds it applied).
func (b *Batcher) Submit(ctx context.Context, op Op) error {
	// waiting counts operations submitted and not yet answered; Run
	// decrements it as it answers, so the count is exact when fill reads it.
	b.waiting.Add(1)
	p := pending{op: op, done: make(chan error, 1)}
	select {
	case b.queue <- p:
	case <-ctx.Done():
		b.waiting.Add(-1)
		return fmt.Errorf("queueing a view operation: %w", context.Cause(ctx))
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("waiting for a view operation to be applied: %w", context.Cause(ctx))
	}
}

// Run gathers and applies batches until ctx ends. Operations still queued
// then are answered with ctx's error.
func (b *Batcher) Run(ctx context.Context) {
	batch := make([]pending, 0, b.size)
	ops := make([]Op, 0, b.size)
	for {
		batch = batch[:0]
		select {
		case p := <-b.queue:
			batch = append(batch, p)
		case <-ctx.Done():
			return
		}
		batch = b.fill(ctx, batch)
		ops = ops[:0]
		for _, p := range batch {
			ops = append(ops, p.op)
		}
		res := b.apply(ctx, ops)
		for i, p := range batch {
			p.done <- res.Errs[i]
		}
		b.waiting.Add(-int64(len(batch)))
	}
}

// fill adds queued operations to batch until one of the flush conditions
// holds.
func (b *Batcher) fill(ctx context.Context, batch []pending) []pending {
	timer := time.NewTimer(b.linger)
	defer timer.Stop()
	for len(batch) < b.size {
		select {
		case p := <-b.queue:
			batch = append(batch, p)
			continue
		default:
		}
		if int64(len(batch)) >= b.waiting.Load() {
			return batch
		}
		select {
		case p := <-b.queue:
			batch = append(batch, p)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}
