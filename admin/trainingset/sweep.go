package trainingset

import (
	"hash/fnv"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/sinks/cassandra"
)

// timedOp is one view operation with its time on the training set's clock
// (its ledger event's publish time, or event time) and its entity (as
// MemTable.EntityOf gives it: what the sweep shards the view by).
type timedOp struct {
	op     cassandra.Op
	at     time.Time
	entity string
}

// sweepView is one view of a sweep: its schema and its operations in
// ledger order (those on entities no label names may be left out).
type sweepView struct {
	schema cassandra.ViewSchema
	ops    []timedOp
}

// sweepLabel is one label of a sweep: its time and its entity's key in
// each view, in the sweep's order of views (as MemTable.ParseKey gives it).
type sweepLabel struct {
	at   time.Time
	keys [][]any
}

// sweepGCPercent is the garbage collector's setting while a sweep runs.
const sweepGCPercent = 400

// sweepTopic is the origin topic of the operations as a sweep applies them:
// numbered in the order it applies them (see sweepOne).
const sweepTopic = "foldline-training-set"

// sweep returns every label's row in every view as of the label's time:
// rows[label][view] holds the view's columns by name as serving returns
// them (MemTable.AsOf: a windowed view's windows as of the label's time),
// nil where the entity had no row then (or a deleted one). An operation
// counts for a label when its time is at or before the label's, or with
// exclusive strictly before it. Each view is one pass: its operations in
// the order of their time (ledger order among equal times), the labels in
// the order of theirs, each label read when the pass reaches its time —
// the cost of sorting both, then linear in labels plus operations. Each
// view is split by entity into GOMAXPROCS shards, each swept on its own,
// all at once on up to GOMAXPROCS cores: one view (a windowed one, whose
// every operation may open a tile) need not keep one core busy while the
// others wait. The views' operation slices are not kept.
func sweep(views []sweepView, labels []sweepLabel, exclusive bool) ([][]map[string]any, error) {
	// The operations are a large live heap that the sweep only reads: a
	// collection each time the heap doubles spent about a sixth of the
	// sweep's CPU (BenchmarkSweep, 300 000 events: 3.7 CPU-s at Go's
	// default, 3.1 at 400, as the fused backfill runs). GOGC, when set,
	// wins.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(sweepGCPercent))
	}
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return labels[a].at.Compare(labels[b].at) })
	rows := make([][]map[string]any, len(labels))
	for i := range rows {
		rows[i] = make([]map[string]any, len(views))
	}
	procs := runtime.GOMAXPROCS(0)
	type shard struct {
		view  int
		ops   []timedOp
		order []int
	}
	var shards []*shard
	for vi, v := range views {
		keys, err := cassandra.NewMemTable(v.schema)
		if err != nil {
			return nil, err
		}
		part := make([]*shard, procs)
		for i := range part {
			part[i] = &shard{view: vi}
		}
		of := func(entity string) *shard { return part[shardOf(entity, procs)] }
		for _, o := range v.ops {
			s := of(o.entity)
			s.ops = append(s.ops, o) // in ledger order still
		}
		views[vi].ops = nil
		for _, li := range order {
			s := of(keys.RowKey(labels[li].keys[vi]))
			s.order = append(s.order, li) // in time order still
		}
		shards = append(shards, part...)
	}
	errs := make([]error, len(shards))
	limit := make(chan struct{}, procs)
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			errs[i] = sweepOne(sweepView{schema: views[s.view].schema, ops: s.ops}, s.view, labels, s.order, exclusive, rows)
			s.ops = nil
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// shardOf is the shard of n an entity's operations and labels go to.
func shardOf(entity string, n int) int {
	if n == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(entity))
	return int(h.Sum32() % uint32(n))
}

// sweepOne sweeps view v (the vi-th) over the labels in order, filling
// rows[label][vi].
//
// When the operations' times follow ledger order (publish time, most
// often) the sweep folds them in ledger order as the sink does, its
// exactly-once rule and all. When they do not (event time, late events),
// they are first folded once in ledger order, as the sink folds them, to
// keep only those the sink applies: not the redeliveries of a position
// already applied to the row, nor those it rejects. The sweep then applies
// them in the order of their time: each numbered anew, in that order, as
// an origin of its own (sweepTopic), so that the fold's exactly-once rule,
// done already, does not take a later position applied before an earlier
// one for a redelivery.
func sweepOne(v sweepView, vi int, labels []sweepLabel, order []int, exclusive bool, rows [][]map[string]any) error {
	byTime := func(a, b timedOp) int { return a.at.Compare(b.at) }
	kept, renumber := v.ops, !slices.IsSortedFunc(v.ops, byTime)
	if renumber {
		ledger, err := cassandra.NewMemTable(v.schema)
		if err != nil {
			return err
		}
		kept = v.ops[:0]
		for _, o := range v.ops {
			if applied, err := ledger.Apply(o.op); err == nil && applied {
				kept = append(kept, o)
			}
		}
		ledger = nil // its rows are not needed again
		slices.SortStableFunc(kept, byTime)
	}
	m, err := cassandra.NewMemTable(v.schema)
	if err != nil {
		return err
	}
	next := 0
	for _, li := range order {
		l := labels[li]
		for ; next < len(kept); next++ {
			at := kept[next].at
			if at.After(l.at) || exclusive && at.Equal(l.at) {
				break
			}
			op := kept[next].op
			if renumber {
				op.Origin = envelope.Origin{Topic: sweepTopic, Position: envelope.Position{Entry: int64(next)}}
			}
			_, _ = m.Apply(op) // a rejected operation changes nothing, live too
		}
		if row, found := m.AsOf(l.keys[vi], l.at); found && !row.Deleted {
			rows[li][vi] = row.Values
		}
	}
	return nil
}
