package cassandra

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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
