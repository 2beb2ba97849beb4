package memview_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/memview"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// op builds the view operation that a transformation would emit.
func op(out transform.Output) envelope.ViewOp {
	o, ok := out.ViewOp()
	if !ok {
		panic("not a view operation: " + out.String())
	}
	return o
}

func row(cols ...transform.Column) transform.Output {
	return transform.Row("v", "k", "a").Apply(cols...)
}

func TestApply(t *testing.T) {
	tests := []struct {
		name string
		ops  []transform.Output
		want map[string]any // nil: no row
	}{
		{
			name: "add counts and sums, negative too",
			ops:  []transform.Output{row(transform.Add("n", 2)), row(transform.Add("n", 3)), row(transform.Add("n", -10))},
			want: map[string]any{"n": int64(-5)},
		},
		{
			name: "add mixes whole and fractional numbers",
			ops:  []transform.Output{row(transform.Add("n", 1)), row(transform.Add("n", 0.5))},
			want: map[string]any{"n": 1.5},
		},
		{
			name: "set keeps the last applied",
			ops:  []transform.Output{row(transform.Set("s", "x")), row(transform.Set("s", "y")).At(t0), row(transform.Set("s", "z")).At(t0.Add(-time.Hour))},
			want: map[string]any{"s": "z"},
		},
		{
			name: "max and min of numbers",
			ops:  []transform.Output{row(transform.Max("hi", 5), transform.Min("lo", 5)), row(transform.Max("hi", 9), transform.Min("lo", 9)), row(transform.Max("hi", -1), transform.Min("lo", -1))},
			want: map[string]any{"hi": int64(9), "lo": int64(-1)},
		},
		{
			name: "max of timestamps compares instants, not text",
			ops:  []transform.Output{row(transform.Max("t", "2026-11-01T10:00:00.5Z")), row(transform.Max("t", "2026-11-01T10:00:00Z")), row(transform.Max("t", "2026-11-01T11:00:00+02:00"))},
			want: map[string]any{"t": "2026-11-01T10:00:00.5Z"},
		},
		{
			name: "latest keeps the value of the latest event time, ties to the later op",
			ops: []transform.Output{
				row(transform.Latest("l", "b")).At(t0.Add(time.Minute)),
				row(transform.Latest("l", "old")).At(t0),
				row(transform.Latest("l", "c")).At(t0.Add(time.Minute)),
			},
			want: map[string]any{"l": "c"},
		},
		{
			name: "delete removes the row",
			ops:  []transform.Output{row(transform.Add("n", 1)), transform.Row("v", "k", "a").Delete()},
		},
		{
			name: "a row recreated after delete starts empty",
			ops:  []transform.Output{row(transform.Add("n", 1), transform.Set("s", "x")), transform.Row("v", "k", "a").Delete(), row(transform.Add("n", 1))},
			want: map[string]any{"n": int64(1)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			views := memview.New()
			for _, o := range tc.ops {
				if err := views.Apply(op(o)); err != nil {
					t.Fatalf("applying %v: %v", o, err)
				}
			}
			got, ok := views.Get("v", map[string]any{"k": "a"})
			if tc.want == nil {
				if ok {
					t.Errorf("row exists: %+v", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got.Columns, tc.want) {
				t.Errorf("row = %+v (exists %v), want columns %v", got, ok, tc.want)
			}
		})
	}
}

func TestApplyRejectsIncomparableValues(t *testing.T) {
	views := memview.New()
	if err := views.Apply(op(row(transform.Set("s", "x"), transform.Max("m", 1)))); err != nil {
		t.Fatal(err)
	}
	for _, o := range []transform.Output{row(transform.Add("s", 1)), row(transform.Max("m", "x"))} {
		if err := views.Apply(op(o)); !errors.Is(err, memview.ErrIncomparable) {
			t.Errorf("applying %v gave %v, want ErrIncomparable", o, err)
		}
	}
	got, _ := views.Get("v", map[string]any{"k": "a"})
	if want := map[string]any{"s": "x", "m": int64(1)}; !reflect.DeepEqual(got.Columns, want) {
		t.Errorf("a failed operation changed the row: %v, want %v", got.Columns, want)
	}
}

func TestRowsAreStableAndKeyed(t *testing.T) {
	views := memview.New()
	for _, k := range []string{"b", "a", "c"} {
		if err := views.Apply(op(transform.Row("v", "k", k).And("n", 1).Apply(transform.Add("x", 1)))); err != nil {
			t.Fatal(err)
		}
	}
	rows := views.Rows("v")
	var keys []any
	for _, r := range rows {
		keys = append(keys, r.Key["k"])
		if r.Key["n"] != int64(1) {
			t.Errorf("composite key column n = %#v", r.Key["n"])
		}
	}
	if want := []any{"a", "b", "c"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("row keys %v, want %v", keys, want)
	}
}
