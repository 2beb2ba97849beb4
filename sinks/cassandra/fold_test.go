package cassandra

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform/memview"
)

// testSchema has one column of every merge rule.
func testSchema(keyspace string) ViewSchema {
	return ViewSchema{
		Keyspace: keyspace, Table: "activity_v1", View: "activity",
		Key: []KeyColumn{{Name: "user", Type: "text"}},
		Columns: []ValueColumn{
			{Name: "views", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "best", Type: "int", Merge: envelope.MergeMax},
			{Name: "low", Type: "double", Merge: envelope.MergeMin},
			{Name: "url", Type: "text", Merge: envelope.MergeSet},
			{Name: "seen", Type: "timestamp", Merge: envelope.MergeMax},
			{Name: "mood", Type: "text", Merge: envelope.MergeLatest},
		},
	}
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// opBuilder writes test operations tersely.
type opBuilder struct {
	view, user string
	topic      string
	entry      int64
	at         time.Time
	cols       []envelope.ColumnOp
	kind       envelope.OpKind
}

func upsert(user, topic string, entry int64) *opBuilder {
	return &opBuilder{view: "activity", user: user, topic: topic, entry: entry, at: t0.Add(time.Duration(entry) * time.Second), kind: envelope.OpApply}
}

func deletion(user, topic string, entry int64) *opBuilder {
	b := upsert(user, topic, entry)
	b.kind = envelope.OpDelete
	return b
}

func (b *opBuilder) col(name string, merge envelope.Merge, value any) *opBuilder {
	raw, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	b.cols = append(b.cols, envelope.ColumnOp{Column: name, Merge: merge, Value: raw})
	return b
}

func (b *opBuilder) rawCol(name string, merge envelope.Merge, raw string) *opBuilder {
	b.cols = append(b.cols, envelope.ColumnOp{Column: name, Merge: merge, Value: json.RawMessage(raw)})
	return b
}

func (b *opBuilder) atTime(t time.Time) *opBuilder { b.at = t; return b }

func (b *opBuilder) op() Op {
	key, _ := json.Marshal(b.user)
	return Op{
		View:   envelope.RowOp{View: b.view, Key: []envelope.KeyValue{{Column: "user", Value: key}}, Kind: b.kind, EventTime: b.at, Columns: b.cols},
		Origin: envelope.Origin{Topic: b.topic, Position: envelope.Position{Ledger: 7, Entry: b.entry}},
	}
}

func mustCompile(t *testing.T, s ViewSchema) *compiledView {
	t.Helper()
	v, err := compileView(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// foldAll folds ops one by one into fresh rows, the way a batch of one
// operation each would, and returns the rows by key.
func foldAll(t *testing.T, v *compiledView, ops []Op) map[string]*rowState {
	t.Helper()
	rows := map[string]*rowState{}
	for i, op := range ops {
		b, err := v.bind(i, op, nil)
		if err != nil {
			t.Fatalf("binding op %d: %v", i, err)
		}
		r, ok := rows[b.rowKey]
		if !ok {
			r = newRowState(len(v.colTypes))
			rows[b.rowKey] = r
		}
		if _, err := v.fold(r, b); err != nil {
			t.Fatalf("folding op %d: %v", i, err)
		}
	}
	return rows
}

func rowKeyOf(t *testing.T, v *compiledView, user string) string {
	t.Helper()
	b, err := v.bind(0, upsert(user, "p0", 1).col("views", envelope.MergeAdd, 1).op(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b.rowKey
}

func TestFoldMergeRules(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	tests := []struct {
		name   string
		ops    []Op
		column string
		want   any
	}{
		{name: "add sums", column: "views", want: int64(5), ops: []Op{
			upsert("u", "p0", 1).col("views", envelope.MergeAdd, 2).op(),
			upsert("u", "p0", 2).col("views", envelope.MergeAdd, 3).op(),
		}},
		{name: "add takes negatives", column: "views", want: int64(-1), ops: []Op{
			upsert("u", "p0", 1).col("views", envelope.MergeAdd, 2).op(),
			upsert("u", "p0", 2).col("views", envelope.MergeAdd, -3).op(),
		}},
		{name: "max keeps the greatest", column: "best", want: int64(9), ops: []Op{
			upsert("u", "p0", 1).col("best", envelope.MergeMax, 9).op(),
			upsert("u", "p0", 2).col("best", envelope.MergeMax, 4).op(),
		}},
		{name: "min keeps the smallest", column: "low", want: 0.5, ops: []Op{
			upsert("u", "p0", 1).col("low", envelope.MergeMin, 2.5).op(),
			upsert("u", "p0", 2).col("low", envelope.MergeMin, 0.5).op(),
			upsert("u", "p0", 3).col("low", envelope.MergeMin, 1.0).op(),
		}},
		{name: "set keeps the last in ledger order", column: "url", want: "/b", ops: []Op{
			upsert("u", "p0", 1).col("url", envelope.MergeSet, "/a").op(),
			upsert("u", "p0", 2).col("url", envelope.MergeSet, "/b").op(),
		}},
		{name: "max of timestamps compares instants", column: "seen", want: t0.Add(time.Hour), ops: []Op{
			upsert("u", "p0", 1).col("seen", envelope.MergeMax, "2026-11-01T11:00:00Z").op(),
			upsert("u", "p0", 2).col("seen", envelope.MergeMax, "2026-11-01T11:30:00+02:00").op(),
		}},
		{name: "latest keeps the latest event time", column: "mood", want: "late", ops: []Op{
			upsert("u", "p0", 1).atTime(t0.Add(time.Hour)).col("mood", envelope.MergeLatest, "late").op(),
			upsert("u", "p0", 2).atTime(t0).col("mood", envelope.MergeLatest, "early").op(),
		}},
		{name: "latest ties go to the later operation", column: "mood", want: "second", ops: []Op{
			upsert("u", "p0", 1).atTime(t0).col("mood", envelope.MergeLatest, "first").op(),
			upsert("u", "p0", 2).atTime(t0).col("mood", envelope.MergeLatest, "second").op(),
		}},
		{name: "an apply after a delete starts from an empty row", column: "views", want: int64(1), ops: []Op{
			upsert("u", "p0", 1).col("views", envelope.MergeAdd, 5).op(),
			deletion("u", "p0", 2).op(),
			upsert("u", "p0", 3).col("views", envelope.MergeAdd, 1).op(),
		}},
		{name: "latest after a delete takes an older event time", column: "mood", want: "old", ops: []Op{
			upsert("u", "p0", 1).atTime(t0.Add(time.Hour)).col("mood", envelope.MergeLatest, "new").op(),
			deletion("u", "p0", 2).op(),
			upsert("u", "p0", 3).atTime(t0).col("mood", envelope.MergeLatest, "old").op(),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := foldAll(t, v, tt.ops)
			got := rows[rowKeyOf(t, v, "u")].values[v.colIndex[tt.column]]
			if !equalValues(got, tt.want) {
				t.Errorf("%s = %v, want %v", tt.column, got, tt.want)
			}
		})
	}
}

func TestFoldSkipsWhatTheRowHasSeen(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	ops := []Op{
		upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op(),
		upsert("u", "p1", 1).col("views", envelope.MergeAdd, 10).op(),
		upsert("u", "p0", 2).col("views", envelope.MergeAdd, 100).op(),
	}
	tests := []struct {
		name       string
		delivered  []int // indices into ops, in delivery order
		wantViews  int64
		wantSkips  int
		wantDelete bool
	}{
		{name: "each once", delivered: []int{0, 1, 2}, wantViews: 111},
		{name: "everything twice", delivered: []int{0, 1, 2, 0, 1, 2}, wantViews: 111, wantSkips: 3},
		{name: "an older op redelivered after newer ones", delivered: []int{0, 1, 2, 0}, wantViews: 111, wantSkips: 1},
		{name: "positions of other partitions do not hide an op", delivered: []int{1, 0, 2}, wantViews: 111},
		{name: "a prefix then the whole batch again", delivered: []int{0, 1, 0, 1, 2}, wantViews: 111, wantSkips: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := newRowState(len(v.colTypes))
			skips := 0
			for _, i := range tt.delivered {
				b, err := v.bind(i, ops[i], nil)
				if err != nil {
					t.Fatal(err)
				}
				applied, err := v.fold(row, b)
				if err != nil {
					t.Fatal(err)
				}
				if !applied {
					skips++
				}
			}
			if got := row.values[v.colIndex["views"]]; got != tt.wantViews {
				t.Errorf("views = %v, want %d", got, tt.wantViews)
			}
			if skips != tt.wantSkips {
				t.Errorf("skipped %d operations, want %d", skips, tt.wantSkips)
			}
		})
	}
}

func TestDeleteRemembersPositionsAgainstStaleUpserts(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	stale := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 5).op()
	row := foldAll(t, v, []Op{stale, deletion("u", "p0", 2).op()})[rowKeyOf(t, v, "u")]
	b, err := v.bind(0, stale, nil)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := v.fold(row, b)
	if err != nil {
		t.Fatal(err)
	}
	if applied || !row.deleted || row.values[v.colIndex["views"]] != nil {
		t.Errorf("a redelivered upsert changed a deleted row: applied=%v deleted=%v views=%v", applied, row.deleted, row.values[v.colIndex["views"]])
	}
}

func TestFoldRejectsOverflowAndLeavesTheRow(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	row := foldAll(t, v, []Op{upsert("u", "p0", 1).col("views", envelope.MergeAdd, int64(1)<<62).col("url", envelope.MergeSet, "/a").op()})[rowKeyOf(t, v, "u")]
	b, err := v.bind(1, upsert("u", "p0", 2).col("url", envelope.MergeSet, "/b").col("views", envelope.MergeAdd, int64(1)<<62).op(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.fold(row, b); !errors.Is(err, ErrBadValue) {
		t.Fatalf("fold error = %v, want ErrBadValue", err)
	}
	if got := row.values[v.colIndex["url"]]; got != "/a" {
		t.Errorf("url = %v after a rejected operation, want /a", got)
	}
	if pos := row.applied["p0"]; pos.Entry != 1 {
		t.Errorf("applied position moved to %v on a rejected operation", pos)
	}
}

func TestBindRejects(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	tests := []struct {
		name string
		op   Op
		want error
	}{
		{name: "another view", op: func() Op {
			b := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1)
			b.view = "other"
			return b.op()
		}(), want: ErrWrongView},
		{name: "unknown column", op: upsert("u", "p0", 1).col("clicks", envelope.MergeAdd, 1).op(), want: ErrUnknownColumn},
		{name: "merge differs from the view", op: upsert("u", "p0", 1).col("views", envelope.MergeMax, 1).op(), want: ErrWrongMerge},
		{name: "string in a bigint", op: upsert("u", "p0", 1).col("views", envelope.MergeAdd, "1").op(), want: ErrBadValue},
		{name: "fraction in a bigint", op: upsert("u", "p0", 1).rawCol("views", envelope.MergeAdd, "1.5").op(), want: ErrBadValue},
		{name: "int out of range", op: upsert("u", "p0", 1).col("best", envelope.MergeMax, int64(1)<<40).op(), want: ErrBadValue},
		{name: "text too large", op: upsert("u", "p0", 1).col("url", envelope.MergeSet, strings.Repeat("x", 65)).op(), want: ErrBadValue},
		{name: "null value", op: upsert("u", "p0", 1).rawCol("url", envelope.MergeSet, "null").op(), want: ErrBadValue},
		{name: "timestamp not RFC 3339", op: upsert("u", "p0", 1).col("seen", envelope.MergeMax, "yesterday").op(), want: ErrBadValue},
		{name: "no origin", op: func() Op {
			o := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op()
			o.Origin = envelope.Origin{}
			return o
		}(), want: envelope.ErrNoOrigin},
		{name: "missing key column", op: func() Op {
			o := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op()
			o.View.Key = []envelope.KeyValue{{Column: "sku", Value: json.RawMessage(`"x"`)}}
			return o
		}(), want: ErrBadKey},
		{name: "extra key column", op: func() Op {
			o := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op()
			o.View.Key = append(o.View.Key, envelope.KeyValue{Column: "sku", Value: json.RawMessage(`"x"`)})
			return o
		}(), want: ErrBadKey},
		{name: "null key", op: func() Op {
			o := upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op()
			o.View.Key[0].Value = json.RawMessage(`null`)
			return o
		}(), want: ErrBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := v.bind(0, tt.op, nil); !errors.Is(err, tt.want) {
				t.Errorf("bind error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCoalesceKeepsRowsAndOrder(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	users := []string{"a", "b", "a", "c", "b", "a"}
	var bound []boundOp
	for i, u := range users {
		b, err := v.bind(i, upsert(u, "p0", int64(i+1)).col("views", envelope.MergeAdd, 1).op(), nil)
		if err != nil {
			t.Fatal(err)
		}
		bound = append(bound, b)
	}
	groups := coalesce(bound)
	if got, want := groupsString(groups), "a:0,2,5 b:1,4 c:3"; got != want {
		t.Errorf("groups = %s, want %s", got, want)
	}
}

// A batch decodes each row's key once, by its JSON, yet a key spelt
// otherwise is the same row, and a bad key is refused every time.
func TestGroupDecodesEachKeyOnce(t *testing.T) {
	a := &Applier{view: mustCompile(t, testSchema("ks"))}
	raws := []string{`"a"`, `"\u0061"`, `"a"`, `null`, `"b"`, `null`, `"a"`}
	var ops []Op
	for i, raw := range raws {
		op := upsert("x", "p0", int64(i+1)).col("views", envelope.MergeAdd, 1).op()
		op.View.Key[0].Value = json.RawMessage(raw)
		ops = append(ops, op)
	}
	p, groups := a.group(ops)
	if got, want := groupsString(groups), "a:0,1,2,6 b:4"; got != want {
		t.Errorf("groups = %s, want %s", got, want)
	}
	for i, err := range p.res.Errs {
		if wantErr := raws[i] == "null"; wantErr != errors.Is(err, ErrBadKey) {
			t.Errorf("operation %d (key %s): error %v", i, raws[i], err)
		}
	}
}

func TestDiffWritesOnlyWhatChanged(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	before := foldAll(t, v, []Op{upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).col("url", envelope.MergeSet, "/a").op()})[rowKeyOf(t, v, "u")]
	tests := []struct {
		name        string
		op          Op
		wantWrite   bool
		wantChanged []string
		wantApplied string
	}{
		{name: "redelivery writes nothing", op: upsert("u", "p0", 1).col("views", envelope.MergeAdd, 1).op()},
		{name: "a new op writes its column and position", op: upsert("u", "p0", 2).col("views", envelope.MergeAdd, 1).op(),
			wantWrite: true, wantChanged: []string{"views"}, wantApplied: "p0=7:2:0"},
		{name: "an unchanged value still moves the position", op: upsert("u", "p1", 9).col("url", envelope.MergeSet, "/a").op(),
			wantWrite: true, wantApplied: "p1=7:9:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := before.clone()
			b, err := v.bind(0, tt.op, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.fold(after, b); err != nil {
				t.Fatal(err)
			}
			w, ok := diff(before, after, false)
			if ok != tt.wantWrite {
				t.Fatalf("write = %v, want %v", ok, tt.wantWrite)
			}
			if !ok {
				return
			}
			var changed, applied []string
			for i, c := range w.changed {
				if c {
					changed = append(changed, v.schema.Columns[i].Name)
				}
			}
			for topic, pos := range w.applied {
				applied = append(applied, topic+"="+pos)
			}
			if fmt.Sprint(changed) != fmt.Sprint(tt.wantChanged) && !(len(changed) == 0 && len(tt.wantChanged) == 0) {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if strings.Join(applied, ",") != tt.wantApplied {
				t.Errorf("applied = %v, want %s", applied, tt.wantApplied)
			}
		})
	}
}

// TestFoldMatchesReferenceSemantics folds a generated stream through the
// sink's fold and through memview, the reference, and compares every row.
func TestFoldMatchesReferenceSemantics(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	ref := memview.New()
	ops := generateOps(rand.New(rand.NewPCG(1, 2)), 2000, 20, []string{"p0", "p1", "p2"})
	for _, op := range ops {
		if err := ref.Apply(op.View.ViewOp()); err != nil {
			t.Fatal(err)
		}
	}
	// The sink also sees every operation a second time, out of order.
	redelivered := append(append([]Op(nil), ops...), ops[len(ops)/2:]...)
	rows := foldAll(t, v, redelivered)
	live := 0
	for _, r := range rows {
		if !r.deleted {
			live++
		}
	}
	want := ref.Rows("activity")
	if live != len(want) {
		t.Fatalf("the sink has %d live rows, the reference %d", live, len(want))
	}
	for _, w := range want {
		r := rows[rowKeyOf(t, v, w.Key["user"].(string))]
		if r == nil || r.deleted {
			t.Fatalf("row %v is missing", w.Key)
		}
		for i, c := range v.schema.Columns {
			if msg := compareWithReference(r.values[i], w.Columns[c.Name]); msg != "" {
				t.Errorf("row %v column %s: %s", w.Key["user"], c.Name, msg)
			}
		}
	}
}

// compareWithReference compares a sink value with memview's JSON-typed one.
func compareWithReference(got, want any) string {
	if want == nil {
		if got != nil {
			return fmt.Sprintf("got %v, the reference has null", got)
		}
		return ""
	}
	if s, ok := want.(string); ok {
		if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
			want = ts.UTC().Truncate(time.Millisecond)
		}
	}
	if !equalValues(got, want) {
		return fmt.Sprintf("got %v, the reference has %v", got, want)
	}
	return ""
}

// generateOps makes a stream of operations on a few users, fed by several
// origin partitions, with every merge rule and some deletes.
func generateOps(rng *rand.Rand, n, users int, partitions []string) []Op {
	entries := map[string]int64{}
	ops := make([]Op, 0, n)
	for range n {
		p := partitions[rng.IntN(len(partitions))]
		entries[p]++
		user := fmt.Sprintf("u%d", rng.IntN(users))
		at := t0.Add(time.Duration(rng.IntN(3600)) * time.Second)
		if rng.IntN(40) == 0 {
			ops = append(ops, deletion(user, p, entries[p]).atTime(at).op())
			continue
		}
		b := upsert(user, p, entries[p]).atTime(at).
			col("views", envelope.MergeAdd, rng.IntN(5)).
			col("best", envelope.MergeMax, rng.IntN(1000)-500).
			col("low", envelope.MergeMin, rng.Float64()*100).
			col("seen", envelope.MergeMax, at.Format(time.RFC3339))
		if rng.IntN(2) == 0 {
			b.col("url", envelope.MergeSet, fmt.Sprintf("/p/%d", rng.IntN(50)))
		}
		if rng.IntN(2) == 0 {
			b.col("mood", envelope.MergeLatest, fmt.Sprintf("m%d", rng.IntN(9)))
		}
		ops = append(ops, b.op())
	}
	return ops
}

// groupsString writes groups as "key:index,index… key:…", each group by
// its first key column.
func groupsString(groups []*rowGroup) string {
	var got []string
	for _, g := range groups {
		var idx []string
		for _, op := range g.ops {
			idx = append(idx, fmt.Sprint(op.index))
		}
		got = append(got, fmt.Sprintf("%v:%s", g.key[0], strings.Join(idx, ",")))
	}
	return strings.Join(got, " ")
}
