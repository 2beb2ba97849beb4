package cassandra

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/safego"
)

// ErrRejected marks an operation that can never apply: a value that does not
// fit its column, an unknown column, a sum that overflows, or a write that
// Cassandra refuses as invalid. Such an operation belongs in the dead-letter
// topic; retrying it would block its row forever.
var ErrRejected = errors.New("operation rejected")

// Result reports what Apply did.
type Result struct {
	// Errs holds one entry per operation, in the order given: nil when the
	// operation is in Cassandra (applied now, or recognised as applied
	// before); an error wrapping ErrRejected when it can never apply; the
	// context's error when Apply was cancelled before Cassandra confirmed it.
	Errs []error
	// Applied counts operations folded into rows now; Redelivered those
	// skipped because their row had already seen them; Expired those
	// dropped because their tile of a windowed view had expired (ErrExpired;
	// their Errs entry is nil); Rows the CQL writes.
	Applied, Redelivered, Expired, Rows int
}

// Applier applies batches of view operations to one view's table with an
// exactly-once effect; see the package documentation for how.
//
// Settings.Concurrency workers read, fold and write rows, each taking the
// oldest row that is ready. A row is ready when no earlier write of it is
// queued or running: two writes of one row never race, and a row sees its
// operations in delivery order, while rows and batches overlap freely.
type Applier struct {
	view     *compiledView
	session  *gocql.Session
	settings Settings
	cache    *rowCache

	selectCQL, appendCQL, replaceCQL string
	// prefetchCQL reads many rows by key with IN; "" when the view's key
	// does not allow it (see prefetchStatement).
	prefetchCQL string
	// batchBytes is the most one batch of rows should write (a variable
	// for tests).
	batchBytes int

	// startMu keeps the rows of one batch queued before the next batch's.
	startMu sync.Mutex
	// queue holds the started rows until a worker has written them.
	queue *rowQueue
	// faults reports a panic in a worker (see Faults).
	faults *safego.Faults
	// metrics times the writes (SetMetrics); nil times nothing.
	metrics atomic.Pointer[SinkMetrics]
}

// SetMetrics makes the applier time its write requests into m.
func (a *Applier) SetMetrics(m *SinkMetrics) { a.metrics.Store(m) }

// timed runs one write request and records its time.
func (a *Applier) timed(write func() error) error {
	m := a.metrics.Load()
	if m == nil {
		return write()
	}
	start := time.Now()
	err := write()
	m.observeWrite(time.Since(start))
	return err
}

// Pending is a started batch; Wait gives its Result.
type Pending struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	res Result
}

// Wait blocks until every operation of the batch is confirmed, rejected, or
// given up because the batch's context ended.
func (p *Pending) Wait() Result {
	p.wg.Wait()
	return p.res
}

func (p *Pending) add(r Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.res.Applied += r.Applied
	p.res.Redelivered += r.Redelivered
	p.res.Rows += r.Rows
}

// NewApplier prepares an Applier for the view's table, which EnsureSchema
// must have created, and starts its workers; Close stops them. settings get
// their defaults here.
func NewApplier(session *gocql.Session, schema ViewSchema, settings Settings) (*Applier, error) {
	settings = settings.Defaults()
	if err := settings.Validate(); err != nil {
		return nil, fmt.Errorf("validating sink settings: %w", err)
	}
	view, err := compileView(schema, settings.MaxValueBytes)
	if err != nil {
		return nil, err
	}
	view.now = time.Now
	a := &Applier{view: view, session: session, settings: settings, cache: newRowCache(settings.cacheRows()),
		queue: newRowQueue(settings.Concurrency * settings.BatchSize), batchBytes: batchBytes, faults: safego.New()}
	a.selectCQL, a.appendCQL, a.replaceCQL = statements(schema)
	a.prefetchCQL = prefetchStatement(schema)
	for range settings.Concurrency {
		a.faults.Go("applying rows of "+schema.Table, a.work)
	}
	return a, nil
}

// Faults reports a panic in one of the workers. The batches that worker
// held never finish, so the owner must stop the sink with the error (the
// runtime then redelivers what was not confirmed) rather than wait on them.
func (a *Applier) Faults() *safego.Faults { return a.faults }

// Close stops the workers once they have finished the started batches. No
// batch may be started after Close.
func (a *Applier) Close() {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	a.queue.close()
}

func (a *Applier) work() {
	for {
		tasks := a.queue.take(a.settings.RowsPerWrite)
		if tasks == nil {
			return
		}
		a.applyRows(tasks[0][0].ctx, tasks)
		for _, task := range tasks {
			a.queue.done(task)
			for _, job := range task {
				job.batch.wg.Done()
			}
		}
	}
}

// statements builds the row read and the two row writes: one appends to the
// latest-at map, the other (after a delete) replaces it. Both append to the
// applied map and never remove from it, so no collection tombstones pile up.
func statements(s ViewSchema) (selectCQL, appendCQL, replaceCQL string) {
	var cols, sets, where []string
	for _, c := range s.Columns {
		cols = append(cols, quote(c.Name))
		sets = append(sets, quote(c.Name)+" = ?")
	}
	for _, k := range s.StorageKey() {
		where = append(where, quote(k.Name)+" = ?")
	}
	w := strings.Join(where, " AND ")
	// A tile's every write sets its expiry anew (the same instant each
	// time: its start plus the view's retention), see rowStatement.
	using := ""
	if s.Windowed() {
		using = " USING TTL ?"
	}
	selectCQL = fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s WHERE %s",
		strings.Join(cols, ", "), ColumnDeleted, ColumnLatestAt, ColumnApplied, s.qualifiedTable(), w)
	update := func(latest string) string {
		return fmt.Sprintf("UPDATE %s%s SET %s, %s = ?, %s, %s = %s + ? WHERE %s",
			s.qualifiedTable(), using, strings.Join(sets, ", "), ColumnDeleted, latest, ColumnApplied, ColumnApplied, w)
	}
	return selectCQL, update(ColumnLatestAt + " = " + ColumnLatestAt + " + ?"), update(ColumnLatestAt + " = ?")
}

// Apply applies a batch and waits for it: Start then Wait.
func (a *Applier) Apply(ctx context.Context, ops []Op) Result {
	return a.Start(ctx, ops).Wait()
}

// Start folds ops into their rows and queues one write per changed row; the
// returned Pending reports when Cassandra confirmed them. Batches must be
// started in delivery order (Start may be called from many goroutines, but
// two calls racing have no defined order). While Cassandra fails, workers
// retry with backoff until ctx ends, and never give up on their own. Start
// blocks while Concurrency × BatchSize rows wait for the workers, which
// bounds memory.
func (a *Applier) Start(ctx context.Context, ops []Op) *Pending {
	p, groups := a.group(ops)
	p.wg.Add(len(groups))
	a.startMu.Lock()
	defer a.startMu.Unlock()
	for _, g := range groups {
		a.queue.push(&rowJob{ctx: ctx, group: g, batch: p})
	}
	return p
}

// group binds a batch's operations and groups them by row: the batch's
// Pending, with the rejected operations' errors recorded, and its rows in
// order of first appearance.
func (a *Applier) group(ops []Op) (*Pending, []*rowGroup) {
	p := &Pending{res: Result{Errs: make([]error, len(ops))}}
	bound := make([]boundOp, 0, len(ops))
	arena := a.view.newBindArena(ops)
	for i, op := range ops {
		b, err := a.view.bind(i, op, arena)
		if errors.Is(err, ErrExpired) {
			p.res.Expired++
			continue
		}
		if err != nil {
			p.res.Errs[i] = fmt.Errorf("%w: %w", ErrRejected, err)
			continue
		}
		bound = append(bound, b)
	}
	return p, coalesce(bound)
}

// rowUpdate is a row folded with the operations of one task (the row's
// jobs, in order) and waiting for its write.
type rowUpdate struct {
	jobs          []*rowJob
	before, after *rowState
	write         rowWrite
	res           []Result // per job
}

// applyRows reads (or recalls) the rows of tasks, folds the operations of
// each task's jobs in order into one write per row, and writes the changed
// rows with one request as far as they fit in batchBytes:
// an unlogged batch of the rows' UPDATEs. Each UPDATE is one partition's
// mutation, which Cassandra applies atomically and in isolation whatever
// happens to the others, so a row's values and positions stay together as
// with a write of its own; a batch that fails part way is retried whole,
// and rewriting a row with the same values and positions changes nothing.
// Every job's results go to its own batch, at the indices of its
// operations, which no other goroutine touches.
func (a *Applier) applyRows(ctx context.Context, tasks [][]*rowJob) {
	a.readUncached(ctx, tasks)
	updates := make([]*rowUpdate, 0, len(tasks))
	for _, task := range tasks {
		if u := a.foldRow(ctx, task); u != nil {
			updates = append(updates, u)
		}
	}
	for len(updates) > 0 {
		n, size := 1, updates[0].size()
		for n < len(updates) && size+updates[n].size() <= a.batchBytes {
			size += updates[n].size()
			n++
		}
		a.writeUpdates(ctx, updates[:n])
		updates = updates[n:]
	}
}

// batchBytes bounds the estimated size (rowUpdate.size) of the rows one
// unlogged batch writes, to stay below Cassandra's default
// batch_size_warn_threshold (5 KiB): a larger batch makes Cassandra log a
// warning, and one over batch_size_fail_threshold (50 KiB) is refused.
const batchBytes = 4 << 10

// size estimates the bytes a row's UPDATE writes: its key, changed values,
// latest-at entries and positions, with 16 bytes per cell for Cassandra's
// timestamps and framing.
func (u *rowUpdate) size() int {
	valueSize := func(v any) int {
		if s, ok := v.(string); ok {
			return len(s) + 16
		}
		return 24
	}
	n := 0
	for _, k := range u.jobs[0].group.key {
		n += valueSize(k)
	}
	for i, v := range u.after.values {
		if u.write.changed[i] {
			n += valueSize(v)
		}
	}
	for topic, pos := range u.write.applied {
		n += len(topic) + len(pos) + 16
	}
	for c := range u.write.latestAt {
		n += len(c) + 24
	}
	return n
}

// writeUpdates writes rows with one request, or, when Cassandra refuses the
// batch (a value it rejects, or a batch larger than it takes), each row
// with a request of its own, to find the row at fault.
func (a *Applier) writeUpdates(ctx context.Context, updates []*rowUpdate) {
	if len(updates) > 1 {
		err := a.writeRows(ctx, updates)
		if err == nil || !errors.Is(err, ErrRejected) {
			for _, u := range updates {
				a.finishRow(u, err)
			}
			return
		}
	}
	for _, u := range updates {
		a.writeUpdate(ctx, u)
	}
}

// readUncached reads, with one IN query, the rows of tasks that are not
// cached, so that a worker writing several new rows makes two round trips
// rather than one per row and one write. A task holds its row's first
// unfinished job, so no write of ours is in flight for these rows and what
// Cassandra returns is current. Rows the read misses (a failed read, one
// row, or a view that cannot be read with IN) are read one by one by
// loadRow. The read happens in the workers, not in Start, so that starting
// batches never waits for Cassandra.
func (a *Applier) readUncached(ctx context.Context, tasks [][]*rowJob) {
	if a.prefetchCQL == "" {
		return
	}
	var want []*rowGroup
	for _, task := range tasks {
		if g := task[0].group; g.before == nil && !a.cache.has(g.rowKey) {
			want = append(want, g)
		}
	}
	if len(want) > 1 {
		a.prefetch(ctx, want)
	}
}

// foldRow reads (or recalls) a task's row and folds the operations of its
// jobs in order. It returns nil, with the jobs' results recorded, when
// there is nothing to write.
func (a *Applier) foldRow(ctx context.Context, task []*rowJob) *rowUpdate {
	before, err := a.loadRow(ctx, task[0].group)
	if err != nil {
		failJobs(task, err)
		return nil
	}
	u := &rowUpdate{jobs: task, before: before, after: before.clone(), res: make([]Result, len(task))}
	sawDelete := false
	for i, job := range task {
		for _, op := range job.group.ops {
			var had envelope.Position // only read when tracing: this is the hot path
			if a.settings.Trace {
				had = u.after.applied[op.origin.Topic]
			}
			applied, err := a.view.fold(u.after, op)
			if a.settings.Trace {
				traceOp(job.group.rowKey, op, had, applied, err)
			}
			switch {
			case err != nil:
				job.batch.res.Errs[op.index] = fmt.Errorf("%w: %w", ErrRejected, err)
			case applied:
				u.res[i].Applied++
				sawDelete = sawDelete || op.kind == envelope.OpDelete
			default:
				u.res[i].Redelivered++
			}
		}
	}
	w, changed := diff(before, u.after, sawDelete)
	if !changed {
		for i, job := range task {
			job.batch.add(u.res[i])
		}
		return nil
	}
	u.write = w
	return u
}

// traceOp logs what folding op into its row did (Settings.Trace): the
// process (one per sink instance), the row, the operation's origin and position, the row's last position of
// that origin before it, and whether the operation was applied, skipped
// as applied before, or rejected.
func traceOp(rowKey string, op boundOp, had envelope.Position, applied bool, err error) {
	fate := "applied"
	switch {
	case err != nil:
		fate = "rejected: " + err.Error()
	case !applied:
		fate = "skipped as applied"
	}
	slog.Info("trace", "pid", os.Getpid(), "row", rowKey, "origin", op.origin.Topic, "position", op.origin.Position.String(), "row_had", had.String(), "fate", fate)
}

// writeUpdate writes one folded row with a request of its own.
func (a *Applier) writeUpdate(ctx context.Context, u *rowUpdate) {
	err := a.writeRow(ctx, u.jobs[0].group.key, u.after, u.write)
	if !errors.Is(err, ErrRejected) {
		a.finishRow(u, err)
		return
	}
	// One of the operations makes the row unwritable; find which by
	// writing them one at a time.
	state := u.before
	for i, job := range u.jobs {
		res, next, err := a.applyOneByOne(ctx, job.group, state, job.batch.res.Errs)
		job.batch.add(res)
		if err != nil {
			failJobs(u.jobs[i+1:], err)
			return
		}
		state = next
	}
}

// finishRow records the outcome of a row's write: on success the row is
// cached and the write counted (once, with the first job); on failure the
// operations get err, and the cache forgets the row, which Cassandra may
// or may not hold.
func (a *Applier) finishRow(u *rowUpdate, err error) {
	rowKey := u.jobs[0].group.rowKey
	if err != nil {
		failJobs(u.jobs, err)
		a.cache.forget(rowKey)
		return
	}
	u.res[0].Rows++
	a.cache.put(rowKey, u.after)
	for i, job := range u.jobs {
		job.batch.add(u.res[i])
	}
}

func failJobs(jobs []*rowJob, err error) {
	for _, job := range jobs {
		failAll(job.group, job.batch.res.Errs, err)
	}
}

// applyOneByOne writes each operation of a row separately from before,
// rejecting those Cassandra refuses and keeping the rest, and returns the
// row as written. When a write fails for another reason it gives the
// row's remaining operations that error, forgets the row, and returns it.
func (a *Applier) applyOneByOne(ctx context.Context, g *rowGroup, before *rowState, errs []error) (Result, *rowState, error) {
	var res Result
	state := before
	for _, op := range g.ops {
		if errs[op.index] != nil {
			continue
		}
		next := state.clone()
		applied, err := a.view.fold(next, op)
		if err != nil {
			errs[op.index] = fmt.Errorf("%w: %w", ErrRejected, err)
			continue
		}
		if !applied {
			res.Redelivered++
			continue
		}
		w, _ := diff(state, next, op.kind == envelope.OpDelete)
		switch err := a.writeRow(ctx, g.key, next, w); {
		case err == nil:
			res.Applied++
			res.Rows++
			state = next
		case errors.Is(err, ErrRejected):
			errs[op.index] = err
		default:
			failAll(g, errs, err)
			a.cache.forget(g.rowKey)
			return res, nil, err
		}
	}
	a.cache.put(g.rowKey, state)
	return res, state, nil
}

func failAll(g *rowGroup, errs []error, err error) {
	for _, op := range g.ops {
		if errs[op.index] == nil {
			errs[op.index] = err
		}
	}
}

// loadRow returns the row's state from the cache or Cassandra, which the
// caller must not change (it may be the cached state); a row that does not
// exist yet is empty.
func (a *Applier) loadRow(ctx context.Context, g *rowGroup) (*rowState, error) {
	if r, ok := a.cache.get(g.rowKey); ok {
		return r, nil
	}
	if g.before != nil {
		a.cache.put(g.rowKey, g.before)
		return g.before, nil
	}
	var state *rowState
	err := a.retry(ctx, "reading a row of "+a.view.schema.Table, func() error {
		s, err := a.readRow(ctx, g.key)
		state = s
		return err
	})
	if err != nil {
		return nil, err
	}
	a.cache.put(g.rowKey, state)
	return state, nil
}

func (a *Applier) readRow(ctx context.Context, key []any) (*rowState, error) {
	dests := a.view.rowDests()
	err := a.session.Query(a.selectCQL, a.bindKey(key)...).WithContext(ctx).
		Consistency(a.settings.consistency()).Idempotent(true).Scan(dests...)
	if errors.Is(err, gocql.ErrNotFound) {
		return newRowState(len(a.view.colTypes)), nil
	}
	if err != nil {
		return nil, err
	}
	return a.view.scanned(dests)
}

// rowDests are the scan destinations of a row read: the value columns, then
// the deleted flag, the latest-at map and the applied map.
func (v *compiledView) rowDests() []any {
	dests := make([]any, 0, len(v.colTypes)+3)
	for _, t := range v.colTypes {
		dests = append(dests, t.scanDest())
	}
	var deleted *bool
	var latest map[string]int64
	var applied map[string]string
	return append(dests, &deleted, &latest, &applied)
}

// scanned turns filled rowDests into a row state.
func (v *compiledView) scanned(dests []any) (*rowState, error) {
	n := len(v.colTypes)
	state := newRowState(n)
	for i, t := range v.colTypes {
		state.values[i] = t.fromScan(dests[i])
	}
	deleted := *(dests[n].(**bool))
	state.deleted = deleted != nil && *deleted
	for c, nanos := range *(dests[n+1].(*map[string]int64)) {
		state.latestAt[c] = time.Unix(0, nanos).UTC()
	}
	for topic, text := range *(dests[n+2].(*map[string]string)) {
		pos, err := envelope.ParsePosition(text)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s of a row: %w", ErrRejected, ColumnApplied, err)
		}
		state.applied[topic] = pos
	}
	return state, nil
}

func (a *Applier) bindKey(key []any) []any {
	out := make([]any, len(key))
	for i, v := range key {
		out[i] = a.view.keyTypes[i].bind(v)
	}
	return out
}

// writeRow writes one row with its UPDATE (rowStatement).
func (a *Applier) writeRow(ctx context.Context, key []any, after *rowState, w rowWrite) error {
	stmt, args := a.rowStatement(key, after, w)
	return a.retry(ctx, "writing a row of "+a.view.schema.Table, func() error {
		return a.timed(a.session.Query(stmt, args...).WithContext(ctx).
			Consistency(a.settings.consistency()).Idempotent(true).Exec)
	})
}

// writeRows writes several rows with one unlogged batch of their UPDATEs.
func (a *Applier) writeRows(ctx context.Context, updates []*rowUpdate) error {
	entries := make([]gocql.BatchEntry, len(updates))
	for i, u := range updates {
		stmt, args := a.rowStatement(u.jobs[0].group.key, u.after, u.write)
		entries[i] = gocql.BatchEntry{Stmt: stmt, Args: args, Idempotent: true}
	}
	what := fmt.Sprintf("writing %d rows of %s", len(updates), a.view.schema.Table)
	return a.retry(ctx, what, func() error {
		b := a.session.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
		b.Entries = entries
		b.SetConsistency(a.settings.consistency())
		return a.timed(func() error { return a.session.ExecuteBatch(b) })
	})
}

// rowStatement is the single UPDATE of a row's partition that writes the
// changed values, the deleted flag when it changed, the changed latest-at
// entries and the applied positions: Cassandra applies a write to one
// partition atomically and in isolation, so the values and the positions
// that account for them can never be seen or kept apart.
func (a *Applier) rowStatement(key []any, after *rowState, w rowWrite) (string, []any) {
	args := make([]any, 0, len(after.values)+4+len(key))
	if a.view.windowed {
		args = append(args, a.view.tileTTL(key))
	}
	for i, v := range after.values {
		switch {
		case !w.changed[i]:
			args = append(args, gocql.UnsetValue)
		case v == nil:
			args = append(args, nil)
		default:
			args = append(args, a.view.colTypes[i].bind(v))
		}
	}
	latest := make(map[string]int64, len(w.latestAt))
	for c, at := range w.latestAt {
		latest[c] = at.UnixNano()
	}
	stmt := a.appendCQL
	var latestArg any = latest
	if w.replaceLatest {
		stmt = a.replaceCQL
	} else if len(latest) == 0 {
		latestArg = gocql.UnsetValue
	}
	var deletedArg any = gocql.UnsetValue
	if w.setDeleted {
		deletedArg = w.deleted
	}
	args = append(args, deletedArg, latestArg, w.applied)
	return stmt, append(args, a.bindKey(key)...)
}

// retry runs fn until it succeeds, fails for good (ErrRejected) or ctx
// ends, waiting between attempts with exponential backoff.
func (a *Applier) retry(ctx context.Context, what string, fn func() error) error {
	wait := a.settings.RetryBackoffMin
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if a.permanent(ctx, err) {
			return fmt.Errorf("%w: %s: %w", ErrRejected, what, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		slog.Warn("Cassandra request failed, retrying", "doing", what, "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, a.settings.RetryBackoffMax)
	}
}

// permanent reports whether Cassandra refused a request for a reason that a
// retry cannot change: its values cannot be encoded, or Cassandra calls the
// request invalid while the table is as the view defines it (so the data is
// at fault). An invalid request against a missing or changed table is an
// operator's problem, not the data's: it is retried until the table is back,
// rather than sending every operation to the dead-letter topic. Everything
// else (timeouts, unavailable replicas, lost connections, overload) is
// retried too.
func (a *Applier) permanent(ctx context.Context, err error) bool {
	if errors.Is(err, ErrRejected) {
		return true
	}
	var marshalErr gocql.MarshalError
	if errors.As(err, &marshalErr) {
		return true
	}
	var reqErr gocql.RequestError
	if !errors.As(err, &reqErr) || reqErr.Code() != gocql.ErrCodeInvalid {
		return false
	}
	existing, readErr := readColumns(ctx, a.session, a.view.schema.Keyspace, a.view.schema.Table)
	if readErr != nil || len(existing) == 0 {
		return false
	}
	if diffs := tableDifferences(a.view.schema, existing); len(diffs) > 0 {
		slog.Error("table differs from the view definition; retrying until it is fixed", "table", a.view.schema.qualifiedTable(), "differences", diffs)
		return false
	}
	return true
}

// rowCache is a bounded LRU of row states, so that a row this instance
// keeps writing is read from Cassandra once. A capacity of 0 caches nothing.
// The states it holds are never changed: put hands a state over, get lends
// it out, and folding works on a clone (a row has one worker at a time, so
// only that worker replaces its entry).
type rowCache struct {
	mu       sync.Mutex
	capacity int
	order    *list.List // front is most recently used; values are *cacheEntry
	byKey    map[string]*list.Element
}

type cacheEntry struct {
	rowKey string
	state  *rowState
}

func newRowCache(capacity int) *rowCache {
	return &rowCache{capacity: capacity, order: list.New(), byKey: map[string]*list.Element{}}
}

// has reports whether rowKey is cached.
func (c *rowCache) has(rowKey string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byKey[rowKey]
	return ok
}

// get returns the cached state, which the caller must not change.
func (c *rowCache) get(rowKey string) (*rowState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[rowKey]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).state, true
}

// put stores state, which no one may change afterwards, evicting the least
// recently used row.
func (c *rowCache) put(rowKey string, state *rowState) {
	if c.capacity == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[rowKey]; ok {
		e.Value.(*cacheEntry).state = state
		c.order.MoveToFront(e)
		return
	}
	c.byKey[rowKey] = c.order.PushFront(&cacheEntry{rowKey: rowKey, state: state})
	if c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cacheEntry).rowKey)
	}
}

// forget drops a row whose write may or may not have reached Cassandra.
func (c *rowCache) forget(rowKey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[rowKey]; ok {
		c.order.Remove(e)
		delete(c.byKey, rowKey)
	}
}
