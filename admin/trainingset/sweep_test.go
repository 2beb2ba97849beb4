package trainingset

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The views of the sweep's tests: all-time views keyed by user and by
// sku, and a windowed one keyed by user.
func userView() cassandra.ViewSchema {
	return cassandra.ViewSchema{Keyspace: "ks", Table: "acts_v1", View: "acts",
		Key: []cassandra.KeyColumn{{Name: "user", Type: "text"}},
		Columns: []cassandra.ValueColumn{
			{Name: "n", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "hi", Type: "bigint", Merge: envelope.MergeMax},
			{Name: "lo", Type: "bigint", Merge: envelope.MergeMin},
			{Name: "last", Type: "text", Merge: envelope.MergeSet},
			{Name: "newest", Type: "bigint", Merge: envelope.MergeLatest},
		}}
}

func skuView() cassandra.ViewSchema {
	return cassandra.ViewSchema{Keyspace: "ks", Table: "sales_v1", View: "sales",
		Key: []cassandra.KeyColumn{{Name: "sku", Type: "text"}},
		Columns: []cassandra.ValueColumn{
			{Name: "n", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "units_sum", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "units_count", Type: "bigint", Merge: envelope.MergeAdd},
		},
		Averages: []cassandra.Average{{Name: "units", Sum: "units_sum", Count: "units_count"}}}
}

func windowView() cassandra.ViewSchema {
	return cassandra.ViewSchema{Keyspace: "ks", Table: "recent_v1", View: "recent", Hop: cassandra.Span(time.Hour),
		Key: []cassandra.KeyColumn{{Name: "user", Type: "text"}},
		Columns: []cassandra.ValueColumn{
			{Name: "n_2h", Type: "bigint", Merge: envelope.MergeAdd, Window: cassandra.Span(2 * time.Hour)},
			{Name: "hi_1d", Type: "bigint", Merge: envelope.MergeMax, Window: cassandra.Span(24 * time.Hour)},
			{Name: "newest_3h", Type: "bigint", Merge: envelope.MergeLatest, Window: cassandra.Span(3 * time.Hour)},
			{Name: "avg_3h_sum", Type: "double", Merge: envelope.MergeAdd, Window: cassandra.Span(3 * time.Hour)},
			{Name: "avg_3h_count", Type: "bigint", Merge: envelope.MergeAdd, Window: cassandra.Span(3 * time.Hour)},
		},
		Averages: []cassandra.Average{{Name: "avg_3h", Sum: "avg_3h_sum", Count: "avg_3h_count"}}}
}

// fakeOp is a view operation as the tests write it: on an entity, at a
// time on the training set's clock (at), with its own event time, from a
// ledger position; values int64 or string; delete when del.
type fakeOp struct {
	entity    string
	at, event time.Time
	topic     string
	entry     int64
	del       bool
	cols      map[string]any
}

func (f fakeOp) timed(schema cassandra.ViewSchema) timedOp {
	key, _ := json.Marshal(f.entity)
	vo := envelope.RowOp{View: schema.View, Key: []envelope.KeyValue{{Column: schema.Key[0].Name, Value: key}},
		Kind: envelope.OpApply, EventTime: f.event}
	if f.del {
		vo.Kind = envelope.OpDelete
	}
	for _, c := range schema.Columns {
		if v, ok := f.cols[c.Name]; ok {
			raw, _ := json.Marshal(v)
			vo.Columns = append(vo.Columns, envelope.ColumnOp{Column: c.Name, Merge: c.Merge, Value: raw})
		}
	}
	return timedOp{op: cassandra.Op{View: vo, Origin: envelope.Origin{Topic: f.topic, Position: envelope.Position{Ledger: 1, Entry: f.entry}}}, at: f.at}
}

// timedOps is ops as the collection keeps them: with their entity.
func timedOps(schema cassandra.ViewSchema, ops []fakeOp) []timedOp {
	keys, err := cassandra.NewMemTable(schema)
	if err != nil {
		panic(err)
	}
	out := make([]timedOp, len(ops))
	for i, o := range ops {
		out[i] = o.timed(schema)
		out[i].entity, _ = keys.EntityOf(out[i].op)
	}
	return out
}

// bruteForce is the row of entity as of t, computed on its own, without
// the sink's fold: the operations the sink applies (in ledger order, not
// a position already applied to the row from the same topic), those at or
// before t (strictly before with exclusive), in the order of their time
// (ledger order among equal ones), folded by each column's merge rule;
// for a windowed view each column only from the tiles of its window as of
// t; an average is the mean of the values its sum column was given. nil
// when the entity has no row or a deleted one (or, windowed, no value in
// any window).
func bruteForce(schema cassandra.ViewSchema, ops []fakeOp, entity string, t time.Time, exclusive bool) map[string]any {
	hop := schema.Hop.Duration()
	lastApplied := map[string]int64{}
	var counted []fakeOp
	for _, o := range ops {
		row := o.entity
		if schema.Windowed() {
			row += "@" + cassandra.TileStart(o.event, hop).String()
		}
		k := row + "|" + o.topic
		if p, seen := lastApplied[k]; seen && o.entry <= p {
			continue // a redelivery
		}
		lastApplied[k] = o.entry
		if o.entity == entity && (o.at.Before(t) || !exclusive && o.at.Equal(t)) {
			counted = append(counted, o)
		}
	}
	slices.SortStableFunc(counted, func(a, b fakeOp) int { return a.at.Compare(b.at) })
	if len(counted) == 0 {
		return nil
	}
	out := map[string]any{}
	latestAt := map[string]time.Time{}
	deleted := false
	for _, o := range counted {
		if o.del {
			out, latestAt, deleted = map[string]any{}, map[string]time.Time{}, true
			continue
		}
		deleted = false
		for _, c := range schema.Columns {
			v, ok := o.cols[c.Name]
			if !ok {
				continue
			}
			if c.Window != 0 {
				tile, last := cassandra.TileStart(o.event, hop), cassandra.TileStart(t, hop)
				if tile.Before(last.Add(-c.Window.Duration())) || tile.After(last) {
					continue
				}
			}
			cur, has := out[c.Name]
			switch c.Merge {
			case envelope.MergeSet:
				out[c.Name] = v
			case envelope.MergeAdd:
				if f, double := v.(float64); double {
					if has {
						f += cur.(float64)
					}
					out[c.Name] = f
					break
				}
				if has {
					v = cur.(int64) + v.(int64)
				}
				out[c.Name] = v
			case envelope.MergeMax:
				if !has || v.(int64) > cur.(int64) {
					out[c.Name] = v
				}
			case envelope.MergeMin:
				if !has || v.(int64) < cur.(int64) {
					out[c.Name] = v
				}
			case envelope.MergeLatest:
				if !has || !o.event.Before(latestAt[c.Name]) {
					out[c.Name], latestAt[c.Name] = v, o.event
				}
			}
		}
	}
	if deleted || len(out) == 0 {
		return nil
	}
	for _, a := range schema.Averages {
		var sum float64
		var n int
		for _, o := range counted[lastDelete(counted)+1:] {
			if v, ok := o.cols[a.Sum]; ok && inWindow(schema, a.Sum, o.event, t) {
				sum += asFloat(v)
				n++
			}
		}
		if n > 0 {
			out[a.Name] = sum / float64(n)
		}
	}
	return out
}

// lastDelete is the index of the last delete among ops, -1 for none.
func lastDelete(ops []fakeOp) int {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].del {
			return i
		}
	}
	return -1
}

// inWindow reports whether an event at event counts in column's value as
// of t: always for a column without a window.
func inWindow(schema cassandra.ViewSchema, column string, event, t time.Time) bool {
	i := slices.IndexFunc(schema.Columns, func(c cassandra.ValueColumn) bool { return c.Name == column })
	c := schema.Columns[i]
	if c.Window == 0 {
		return true
	}
	hop := schema.Hop.Duration()
	tile, last := cassandra.TileStart(event, hop), cassandra.TileStart(t, hop)
	return !tile.Before(last.Add(-c.Window.Duration())) && !tile.After(last)
}

func asFloat(v any) float64 {
	if f, ok := v.(float64); ok {
		return f
	}
	return float64(v.(int64))
}

// sameRow compares a sweep's row with bruteForce's: no row and a row with
// no value are the same nulls in a training set.
func sameRow(got, want map[string]any) bool {
	if len(got) == 0 || len(want) == 0 {
		return len(got) == len(want)
	}
	return maps.Equal(got, want)
}

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func clock(h, m int) time.Time {
	return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// TestSweepTiesAndExclusive: an event at exactly a label's time counts by
// default, and not with exclusive; all-time and windowed views alike, one
// label file keyed by both user and sku for views keyed by each.
func TestSweepTiesAndExclusive(t *testing.T) {
	acts := []fakeOp{
		{entity: "u1", at: clock(10, 0), topic: "p", entry: 1, cols: map[string]any{"n": int64(1), "last": "a"}},
		{entity: "u1", at: clock(10, 0), topic: "p", entry: 2, cols: map[string]any{"n": int64(1), "last": "b"}},
		{entity: "u1", at: clock(11, 0), topic: "p", entry: 4, cols: map[string]any{"n": int64(1), "last": "c"}},
	}
	sales := []fakeOp{
		{entity: "s1", at: clock(10, 0), topic: "p", entry: 3, cols: map[string]any{"n": int64(5)}},
	}
	// Windowed, by event time: n_2h as of t adds the tiles from t's hour
	// minus 2h to t's hour.
	recent := []fakeOp{
		{entity: "u1", at: clock(8, 10), event: clock(8, 10), topic: "p", entry: 1, cols: map[string]any{"n_2h": int64(1)}},
		{entity: "u1", at: clock(9, 20), event: clock(9, 20), topic: "p", entry: 2, cols: map[string]any{"n_2h": int64(1)}},
		{entity: "u1", at: clock(10, 30), event: clock(10, 30), topic: "p", entry: 3, cols: map[string]any{"n_2h": int64(1)}},
		{entity: "u1", at: clock(11, 40), event: clock(11, 40), topic: "p", entry: 4, cols: map[string]any{"n_2h": int64(1)}},
	}
	for _, tc := range []struct {
		name      string
		at        time.Time
		exclusive bool
		acts      map[string]any
		sales     map[string]any
		recent    map[string]any
	}{
		{name: "before any", at: clock(9, 0), acts: nil, sales: nil, recent: map[string]any{"n_2h": int64(1)}},
		{name: "at the tie", at: clock(10, 0), acts: map[string]any{"n": int64(2), "last": "b"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(2)}},
		{name: "at the tie, exclusive", at: clock(10, 0), exclusive: true, acts: nil, sales: nil, recent: map[string]any{"n_2h": int64(2)}},
		{name: "between", at: clock(10, 30), acts: map[string]any{"n": int64(2), "last": "b"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(3)}},
		{name: "windowed tie, exclusive", at: clock(10, 30), exclusive: true, acts: map[string]any{"n": int64(2), "last": "b"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(2)}},
		{name: "second tie", at: clock(11, 0), acts: map[string]any{"n": int64(3), "last": "c"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(2)}},
		{name: "second tie, exclusive", at: clock(11, 0), exclusive: true, acts: map[string]any{"n": int64(2), "last": "b"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(2)}},
		// 08:10's tile has left every window by 11:50.
		{name: "window slid", at: clock(11, 50), acts: map[string]any{"n": int64(3), "last": "c"}, sales: map[string]any{"n": int64(5)}, recent: map[string]any{"n_2h": int64(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			views := []sweepView{
				{schema: userView(), ops: timedOps(userView(), acts)},
				{schema: skuView(), ops: timedOps(skuView(), sales)},
				{schema: windowView(), ops: timedOps(windowView(), recent)},
			}
			labels := []sweepLabel{{at: tc.at, keys: [][]any{{"u1"}, {"s1"}, {"u1"}}}}
			rows, err := sweep(views, labels, tc.exclusive)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []map[string]any{tc.acts, tc.sales, tc.recent} {
				if !sameRow(rows[0][i], want) {
					t.Errorf("view %s: %v, want %v", views[i].schema.View, rows[0][i], want)
				}
			}
		})
	}
}

// TestSweepAppliesLateEventsInTimeOrder: by event time, an event later in
// the ledger but earlier in time is applied before the other, and is not
// taken for a redelivery (the fold's exactly-once rule would skip a
// position before one already applied); a true redelivery still is.
func TestSweepAppliesLateEventsInTimeOrder(t *testing.T) {
	ops := []fakeOp{
		{entity: "u1", at: clock(10, 5), event: clock(10, 5), topic: "p", entry: 1, cols: map[string]any{"n": int64(1), "last": "on time"}},
		{entity: "u1", at: clock(10, 0), event: clock(10, 0), topic: "p", entry: 2, cols: map[string]any{"n": int64(1), "last": "late"}},
		{entity: "u1", at: clock(10, 0), event: clock(10, 0), topic: "p", entry: 2, cols: map[string]any{"n": int64(1), "last": "late"}}, // redelivered
	}
	rows, err := sweep([]sweepView{{schema: userView(), ops: timedOps(userView(), ops)}},
		[]sweepLabel{{at: clock(10, 1), keys: [][]any{{"u1"}}}, {at: clock(10, 10), keys: [][]any{{"u1"}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []map[string]any{{"n": int64(1), "last": "late"}, {"n": int64(2), "last": "on time"}} {
		if !sameRow(rows[i][0], want) {
			t.Errorf("label %d: %v, want %v", i, rows[i][0], want)
		}
	}
}

// TestSweepEqualsBruteForce: random operations of three views (all-time
// by user with every merge rule and deletes, all-time by sku, windowed by
// user) from two origin topics with redeliveries, event times out of
// ledger order, publish times with ties; random labels, many at exactly an
// operation's time. Every label's row in every view equals the brute-force
// fold, by publish time and by event time, inclusive and exclusive.
func TestSweepEqualsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 3))
	users := []string{"u0", "u1", "u2", "u3", "nobody"}
	skus := []string{"s0", "s1", "s2"}
	schemas := []cassandra.ViewSchema{userView(), skuView(), windowView()}
	history := make([][]fakeOp, len(schemas))
	publish := t0
	var times []time.Time
	entries := map[string]int64{}
	for i := range 2000 {
		if rng.IntN(3) > 0 {
			publish = publish.Add(time.Duration(rng.IntN(120)) * time.Second) // a third share the time of the one before
		}
		event := publish.Add(time.Duration(rng.IntN(6*3600)-3*3600) * time.Second)
		topic := fmt.Sprintf("p%d", i%2)
		entries[topic]++
		vi := rng.IntN(len(schemas))
		o := fakeOp{at: publish, event: event, topic: topic, entry: entries[topic]}
		switch vi {
		case 0:
			o.entity = users[rng.IntN(len(users)-1)]
			o.del = rng.IntN(40) == 0
			if !o.del {
				v := rng.Int64N(100) - 50
				o.cols = map[string]any{"n": v, "hi": v, "lo": v, "last": fmt.Sprint("v", v), "newest": v}
				delete(o.cols, []string{"n", "hi", "lo", "last", "newest"}[rng.IntN(5)])
			}
		case 1:
			units := rng.Int64N(10)
			o.entity, o.cols = skus[rng.IntN(len(skus))], map[string]any{"n": units, "units_sum": units, "units_count": int64(1)}
		case 2:
			v := rng.Int64N(1000)
			o.entity, o.cols = users[rng.IntN(len(users)-1)], map[string]any{"n_2h": int64(1), "hi_1d": v, "newest_3h": v, "avg_3h_sum": float64(v), "avg_3h_count": int64(1)}
		}
		history[vi] = append(history[vi], o)
		times = append(times, publish, event)
		if h := history[vi]; len(h) > 5 && rng.IntN(50) == 0 {
			// A redelivery: an earlier operation of the same topic again,
			// later in the ledger.
			for j := len(h) - 2; j >= 0; j-- {
				if h[j].topic == topic {
					again := h[j]
					again.at = publish
					history[vi] = append(history[vi], again)
					break
				}
			}
		}
	}
	var labels []sweepLabel
	for range 300 {
		var at time.Time
		if rng.IntN(2) == 0 {
			at = times[rng.IntN(len(times))]
		} else {
			at = t0.Add(time.Duration(rng.Int64N(int64(publish.Sub(t0) + 6*time.Hour))))
		}
		u, s := users[rng.IntN(len(users))], skus[rng.IntN(len(skus))]
		labels = append(labels, sweepLabel{at: at, keys: [][]any{{u}, {s}, {u}}})
	}
	for _, clockName := range []string{TimePublish, TimeEvent} {
		for _, exclusive := range []bool{false, true} {
			// One shard per view, and three (GOMAXPROCS).
			procs := 1
			if exclusive {
				procs = 3
			}
			t.Run(fmt.Sprintf("%s exclusive=%v shards=%d", clockName, exclusive, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				ops := make([][]fakeOp, len(schemas))
				views := make([]sweepView, len(schemas))
				for vi, h := range history {
					ops[vi] = slices.Clone(h)
					if clockName == TimeEvent {
						for j := range ops[vi] {
							ops[vi][j].at = ops[vi][j].event
						}
					}
					views[vi] = sweepView{schema: schemas[vi], ops: timedOps(schemas[vi], ops[vi])}
				}
				rows, err := sweep(views, labels, exclusive)
				if err != nil {
					t.Fatal(err)
				}
				bad, nonNull := 0, 0
				for li, l := range labels {
					for vi, schema := range schemas {
						want := bruteForce(schema, ops[vi], l.keys[vi][0].(string), l.at, exclusive)
						if want != nil {
							nonNull++
						}
						if !sameRow(rows[li][vi], want) {
							t.Errorf("label %d (%v at %s), view %s: %v, want %v", li, l.keys[vi], l.at, schema.View, rows[li][vi], want)
							if bad++; bad > 5 {
								t.FailNow()
							}
						}
					}
				}
				if nonNull < len(labels) {
					t.Fatalf("only %d of %d rows have values: the test checks too little", nonNull, len(labels)*len(schemas))
				}
			})
		}
	}
}
