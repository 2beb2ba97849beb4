package cassandra

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
)

func TestAverageOf(t *testing.T) {
	a := Average{Name: "avg", Sum: "s", Count: "n"}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   float64
		ok     bool
	}{
		{"integers", map[string]any{"s": int64(7), "n": int64(2)}, 3.5, true},
		{"doubles", map[string]any{"s": 1.5, "n": int64(3)}, 0.5, true},
		{"negative", map[string]any{"s": int64(-9), "n": int64(4)}, -2.25, true},
		{"count 0 is null", map[string]any{"s": int64(0), "n": int64(0)}, 0, false},
		{"no count is null", map[string]any{"s": int64(5)}, 0, false},
		{"no event is null", map[string]any{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := a.Of(tc.values)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("Of(%v) = %v, %v; want %v, %v", tc.values, got, ok, tc.want, tc.ok)
			}
			s := ViewSchema{Averages: []Average{a}}
			s.AddAverages(tc.values)
			if v, set := tc.values["avg"]; set != tc.ok || (set && v != tc.want) {
				t.Fatalf("AddAverages set avg = %v (%v), want %v (%v)", v, set, tc.want, tc.ok)
			}
		})
	}
}

// TestMemTableAllTimeAverageEqualsMean folds the operations of an all-time
// view with an average, redeliveries included, and reads every user's row
// as training sets do (AsOf): the average is the mean of the user's
// values, computed here from the events, and absent for a user without.
func TestMemTableAllTimeAverageEqualsMean(t *testing.T) {
	schema := ViewSchema{Keyspace: "ks", Table: "a_v1", View: "a",
		Key: []KeyColumn{{Name: "user", Type: "text"}},
		Columns: []ValueColumn{
			{Name: "qty_sum", Type: "double", Merge: envelope.MergeAdd},
			{Name: "qty_count", Type: "bigint", Merge: envelope.MergeAdd},
		},
		Averages: []Average{{Name: "qty", Sum: "qty_sum", Count: "qty_count"}}}
	if err := schema.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := NewMemTable(schema)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 43))
	values := map[string][]int64{}
	for i := range 2000 {
		user, v := fmt.Sprintf("u%d", rng.IntN(5)), rng.Int64N(100)-20
		values[user] = append(values[user], v)
		key, _ := json.Marshal(user)
		op := Op{
			View: envelope.RowOp{View: "a", Key: []envelope.KeyValue{{Column: "user", Value: key}}, Kind: envelope.OpApply, EventTime: time.Unix(int64(i), 0),
				Columns: []envelope.ColumnOp{
					{Column: "qty_sum", Merge: envelope.MergeAdd, Value: json.RawMessage(fmt.Sprint(v))},
					{Column: "qty_count", Merge: envelope.MergeAdd, Value: json.RawMessage(`1`)},
				}},
			Origin: envelope.Origin{Topic: "persistent://t/n/ledger", Position: envelope.Position{Ledger: 1, Entry: int64(i)}},
		}
		for range 1 + rng.IntN(2) { // some twice: the sink skips them
			if _, err := m.Apply(op); err != nil {
				t.Fatal(err)
			}
		}
	}
	for u := range 6 { // u5 has no event
		user := fmt.Sprintf("u%d", u)
		row, found := m.AsOf([]any{user}, time.Now())
		vs := values[user]
		if len(vs) == 0 {
			if found {
				t.Fatalf("%s has no event, but a row %v", user, row.Values)
			}
			continue
		}
		var sum int64
		for _, v := range vs {
			sum += v
		}
		if got, want := row.Values["qty"], float64(sum)/float64(len(vs)); got != want {
			t.Fatalf("%s: average %v, want %v, the mean of its %d values", user, got, want, len(vs))
		}
	}
}

// TestAverageInCQL applies a windowed view's operations to the real
// Cassandra and checks the CQL that docs/declared-views.md gives for an
// average over a window, sum(x_sum) / sum(x_count) over the window's
// tiles, against the readers' (CombineTiles over the same tiles): equal
// for an entity with events in the window, NaN in CQL where the readers
// give null.
func TestAverageInCQL(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	day := Span(24 * time.Hour)
	s := ViewSchema{Keyspace: keyspace, Table: "user_carts_1d_v1", View: "user_carts_1d", Hop: Span(time.Hour),
		Key: []KeyColumn{{Name: "user", Type: "text"}},
		Columns: []ValueColumn{
			{Name: "cart_qty_avg_1d_sum", Type: "double", Merge: envelope.MergeAdd, Window: day},
			{Name: "cart_qty_avg_1d_count", Type: "bigint", Merge: envelope.MergeAdd, Window: day},
		},
		Averages: []Average{{Name: "cart_qty_avg_1d", Sum: "cart_qty_avg_1d_sum", Count: "cart_qty_avg_1d_count"}}}
	a := newTestApplier(t, session, s, settings)
	now := time.Now().UTC()
	var ops []Op
	for i, e := range []struct {
		user string
		ago  time.Duration
		qty  int
	}{{"u42", 20 * time.Hour, 3}, {"u42", 3 * time.Hour, 2}, {"u42", 30 * time.Minute, 5}, {"u7", 23*time.Hour + 30*time.Minute, 4}} {
		key, _ := json.Marshal(e.user)
		ops = append(ops, Op{
			View: envelope.RowOp{View: s.View, Key: []envelope.KeyValue{{Column: "user", Value: key}}, Kind: envelope.OpApply, EventTime: now.Add(-e.ago),
				Columns: []envelope.ColumnOp{
					{Column: "cart_qty_avg_1d_sum", Merge: envelope.MergeAdd, Value: json.RawMessage(fmt.Sprint(e.qty))},
					{Column: "cart_qty_avg_1d_count", Merge: envelope.MergeAdd, Value: json.RawMessage(`1`)},
				}},
			Origin: envelope.Origin{Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 1, Entry: int64(i)}},
		})
	}
	if res := a.Apply(t.Context(), ops); res.Applied != len(ops) {
		t.Fatalf("applied %d of %d operations: %+v", res.Applied, len(ops), res)
	}
	query := fmt.Sprintf(`SELECT sum(cart_qty_avg_1d_sum) / sum(cart_qty_avg_1d_count) FROM %s WHERE "user" = ? AND fl_tile >= ? AND fl_tile <= ?`, s.qualifiedTable())
	// As of two hours from now, u7's one event has left the 1-day window,
	// u42's three have not.
	at := now.Add(2 * time.Hour)
	from, to := WindowTiles(at, day, time.Hour)
	t.Logf("as of %s: %s, fl_tile in [%s, %s]", at.Format(time.RFC3339), query, from.Format(time.RFC3339), to.Format(time.RFC3339))
	for _, user := range []string{"u42", "u7"} {
		var cql float64
		if err := session.Query(query, user, from, to).Scan(&cql); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		tiles, err := ReadTiles(t.Context(), session, s, []any{user}, from, to, settings.consistency())
		if err != nil {
			t.Fatal(err)
		}
		avg, found := s.CombineTiles(tiles, at)["cart_qty_avg_1d"]
		t.Logf("%s: CQL %v, readers %v", user, cql, avg)
		switch {
		case found && avg != cql:
			t.Errorf("%s: CQL gives %v, the readers %v", user, cql, avg)
		case !found && !math.IsNaN(cql):
			t.Errorf("%s: CQL gives %v over a window without events, want NaN (the readers' null)", user, cql)
		}
	}
	if avg, _ := s.CombineTiles(mustTiles(t, session, s, settings, "u42", from, to), at)["cart_qty_avg_1d"]; avg != 10.0/3 {
		t.Errorf("u42's average over the day: %v, want 10/3", avg)
	}
}

func mustTiles(t *testing.T, session *gocql.Session, s ViewSchema, settings Settings, user string, from, to time.Time) []Tile {
	t.Helper()
	tiles, err := ReadTiles(t.Context(), session, s, []any{user}, from, to, settings.consistency())
	if err != nil {
		t.Fatal(err)
	}
	return tiles
}
