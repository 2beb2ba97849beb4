package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foldline/foldline/internal/safego"
)

// BatchStarter starts applying a batch; Applier is one.
type BatchStarter interface {
	Start(ctx context.Context, ops []Op) *Pending
}

// Batcher turns operations submitted one at a time into batches for a
// BatchStarter, and tells each submitter when Cassandra has confirmed its
// operation. The runtime hands the sink one message per handler call; the
// handler defers the message's outcome (pf's FunctionContext.Defer), submits
// with SubmitAsync and returns, so the next message joins the same batch.
// SubmitAsync blocks only while the queue is full: that is the sink's
// backpressure, and what keeps memory bounded under a backlog.
//
// Up to Pipeline batches are in flight at once. Submitters add to the
// batch filling, which is started as its Cut says once one of them is done.
// Memory holds at most Pipeline+1 batches. Submitting costs a lock, not a
// hand-over to another goroutine: Run is woken only when the filling batch
// may be ready (its first operation, a full batch, nothing more coming).
type Batcher struct {
	starter  BatchStarter
	pipeline int
	cut      atomic.Pointer[Cut]
	// upcoming is the number of operations the submitter has announced
	// beyond those submitted (Upcoming).
	upcoming atomic.Int64

	mu sync.Mutex
	// filling is the batch submitters add to; Run takes it whole.
	filling []pending
	// room is closed when Run takes the filling batch, for submitters
	// waiting while it is full.
	room chan struct{}
	// wake asks Run to look at the filling batch again. It holds one
	// signal, so that none is lost while Run is busy.
	wake chan struct{}
	// flush asks Run to start the filling batch whatever its cut (Flush).
	flush atomic.Bool

	// applied, skipped, rejected and expired count the answered operations
	// (Totals).
	applied, skipped, rejected, expired atomic.Int64
	// faults reports a panic while answering a batch (see Faults).
	faults *safego.Faults
}

// User metrics under which the sink function exports its Totals (functions
// stats' userMetrics and the instance's Prometheus endpoint, per instance
// since it started); foldline status shows them per view.
const (
	MetricApplied  = "foldline_sink_applied"
	MetricSkipped  = "foldline_sink_skipped_duplicates"
	MetricRejected = "foldline_sink_rejected"
	MetricExpired  = "foldline_sink_expired"
)

// Totals counts the operations a Batcher has answered since it started.
type Totals struct {
	// Applied operations were folded into their rows.
	Applied int64
	// Skipped operations were recognised as applied before (at or before
	// their row's last applied position of their origin partition): a
	// redelivery. A skip is never silent: the sink exports this count.
	Skipped int64
	// Rejected operations can never apply (ErrRejected): they go to the
	// dead-letter topic with the reason.
	Rejected int64
	// Expired operations were dropped from a windowed view because their
	// tile had expired: events older than the longest window and a hop.
	Expired int64
}

// Totals returns the counts so far; safe to call from any goroutine.
func (b *Batcher) Totals() Totals {
	return Totals{Applied: b.applied.Load(), Skipped: b.skipped.Load(), Rejected: b.rejected.Load(), Expired: b.expired.Load()}
}

// Cut says when a batch is started: when it holds Size operations, when
// Linger has passed since its first operation, or, if Eager, when no more
// operations are coming — every caller waiting in Submit outside the batches
// in flight is in it and the submitter announced no more input (Upcoming) —
// and Quiet has passed since its first operation.
// Eager suits a live table: waiting longer only adds latency, so a quiet
// stream is written at once (or after Quiet), while under a backlog the
// runtime already holds the next messages and the batch waits for them, so
// operations on one row coalesce. Quiet trades a little latency for fewer,
// larger writes of a steady stream that arrives a message at a time. A
// table nobody reads yet (a backfill's) is better written in large batches
// cut by size or time alone.
type Cut struct {
	Size   int
	Linger time.Duration
	Eager  bool
	Quiet  time.Duration
}

type pending struct {
	op   Op
	done func(error)
}

// NewBatcher returns a Batcher that cuts batches as cut says; Run must be
// running for Submit to return.
func NewBatcher(starter BatchStarter, cut Cut, pipeline int) *Batcher {
	b := &Batcher{starter: starter, pipeline: max(pipeline, 1), room: make(chan struct{}), wake: make(chan struct{}, 1), faults: safego.New()}
	b.SetCut(cut)
	return b
}

// Faults reports a panic in Run or in answering a batch's callers; the
// owner stops the sink with it.
func (b *Batcher) Faults() *safego.Faults { return b.faults }

// SetCut changes how batches are cut, from the next batch on.
func (b *Batcher) SetCut(cut Cut) {
	b.cut.Store(&cut)
}

// Submit queues op and waits until its batch is applied. It returns nil when
// Cassandra holds the operation's effect, an error wrapping ErrRejected when
// it can never apply, or an error when ctx ends first (the operation may
// still be applied later; redelivery then finds it applied).
func (b *Batcher) Submit(ctx context.Context, op Op) error {
	done := make(chan error, 1)
	if err := b.SubmitAsync(ctx, op, func(err error) { done <- err }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("waiting for a view operation to be applied: %w", context.Cause(ctx))
	}
}

// SubmitAsync queues op, blocking while the queue is full, and returns; done
// is called once with what Submit would return, from another goroutine, when
// op's batch is applied. It returns an error (and never calls done) when ctx
// ends before op is queued.
func (b *Batcher) SubmitAsync(ctx context.Context, op Op, done func(error)) error {
	for {
		b.mu.Lock()
		cut := b.cut.Load()
		if n := len(b.filling); n < max(cut.Size, 1) {
			if b.filling == nil {
				b.filling = make([]pending, 0, max(cut.Size, 1))
			}
			b.filling = append(b.filling, pending{op: op, done: done})
			b.mu.Unlock()
			if n == 0 || n+1 >= cut.Size || b.nothingComing(cut) {
				b.signal()
			}
			return nil
		}
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("queueing a view operation: %w", context.Cause(ctx))
		}
	}
}

// nothingComing reports whether an eager cut may start the filling batch:
// every submitted operation not in flight is in it, and no more are
// announced.
func (b *Batcher) nothingComing(cut *Cut) bool {
	return cut.Eager && b.upcoming.Load() <= 0
}

// signal wakes Run, or leaves it a signal.
func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Upcoming announces that n more operations are already at hand and will be
// submitted right away (a sink passes the runtime's count of received
// messages waiting for the handler, pf's FunctionContext.Pending). While it
// is above zero an eager batch keeps filling, up to its cut's Size or Linger.
func (b *Batcher) Upcoming(n int) {
	// No wake-up: the submission that follows the announcement looks.
	b.upcoming.Store(int64(n))
}

// Flush starts the batch filling now, whatever its cut says: the submitter
// has come to the end of its input (a bounded one, such as a ledger folded
// up to a position) and nothing will join the batch.
func (b *Batcher) Flush() {
	b.flush.Store(true)
	b.signal()
}

// Run gathers and starts batches until ctx ends, answering callers as their
// batches finish. Operations still queued when ctx ends get no answer; their
// callers' own contexts end with the sink.
func (b *Batcher) Run(ctx context.Context) {
	defer b.faults.Recover("gathering batches")
	slots := make(chan struct{}, b.pipeline)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		batch := b.gather(ctx)
		if batch == nil {
			return
		}
		ops := make([]Op, len(batch))
		for i, p := range batch {
			ops[i] = p.op
		}
		started := b.starter.Start(ctx, ops)
		b.faults.Go("answering a batch", func() {
			res := started.Wait()
			b.count(res)
			for i, p := range batch {
				p.done(res.Errs[i])
			}
			<-slots
		})
	}
}

// count adds a batch's result to the totals, before its submitters hear of
// it, so that a submitter reading Totals sees its own operation counted.
func (b *Batcher) count(res Result) {
	rejected := 0
	for _, err := range res.Errs {
		if errors.Is(err, ErrRejected) {
			rejected++
		}
	}
	b.applied.Add(int64(res.Applied))
	b.skipped.Add(int64(res.Redelivered))
	b.rejected.Add(int64(rejected))
	b.expired.Add(int64(res.Expired))
}

// gather waits until the filling batch is to be started, as its cut says,
// and takes it; nil when ctx ends first. The linger and the quiet wait run
// from the moment gather finds the batch's first operation.
func (b *Batcher) gather(ctx context.Context) []pending {
	var linger, quiet <-chan time.Time
	lingered, quieted := false, false
	for {
		b.mu.Lock()
		cut := b.cut.Load()
		n := len(b.filling)
		quieted = quieted || cut.Quiet <= 0
		if n > 0 && (n >= cut.Size || lingered || (quieted && b.nothingComing(cut)) || b.flush.Load()) {
			batch := b.filling
			b.filling = nil
			b.flush.Store(false)
			close(b.room)
			b.room = make(chan struct{})
			b.mu.Unlock()
			return batch
		}
		b.mu.Unlock()
		if n > 0 && linger == nil {
			timer := time.NewTimer(cut.Linger)
			defer timer.Stop()
			linger = timer.C
			if !quieted && cut.Eager {
				q := time.NewTimer(cut.Quiet)
				defer q.Stop()
				quiet = q.C
			}
		}
		select {
		case <-b.wake:
		case <-linger:
			lingered = true
		case <-quiet:
			quieted = true
		case <-ctx.Done():
			return nil
		}
	}
}
