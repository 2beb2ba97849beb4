package transform_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var (
	t0     = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	origin = envelope.Origin{Topic: "persistent://shop/ledger/events-partition-3", Position: envelope.Position{Ledger: 12, Entry: 34, Batch: 5}}
)

// passThrough emits whatever its function returns, to test the encoding of
// outputs in isolation.
func passThrough(outs ...transform.Output) *transform.Transformation[map[string]any] {
	return transform.New(transform.JSON[map[string]any], func(transform.Input[map[string]any]) ([]transform.Output, error) {
		return outs, nil
	})
}

func TestProcessEncodesOutputs(t *testing.T) {
	in := transform.Message{Key: "u42", EventTime: t0, Payload: []byte(`{"a":1}`), Origin: origin}
	later := t0.Add(time.Hour)
	tests := []struct {
		name string
		out  transform.Output
		want transform.Record
	}{
		{
			name: "record inherits key and time",
			out:  transform.Emit("", map[string]int{"n": 1}),
			want: transform.Record{Key: "u42", EventTime: t0, Payload: []byte(`{"n":1}`), Origin: origin},
		},
		{
			name: "record with its own key and time",
			out:  transform.EmitBytes("sku-7", []byte("raw")).At(later),
			want: transform.Record{Key: "sku-7", EventTime: later, Payload: []byte("raw"), Origin: origin},
		},
		{
			name: "view operation keyed by its row",
			out:  transform.Row("v", "sku", "sku-7").Apply(transform.Add("units", 2)),
			want: transform.Record{Key: "sku-7", EventTime: t0, Origin: origin,
				Payload: []byte(`{"view":"v","key":{"sku":"sku-7"},"op":"apply","time":"2026-11-01T10:00:00Z","columns":[{"column":"units","merge":"add","value":2}]}`)},
		},
		{
			name: "view operation at its own time",
			out:  transform.Row("v", "id", 7).Delete().At(later),
			want: transform.Record{Key: "7", EventTime: later, Origin: origin,
				Payload: []byte(`{"view":"v","key":{"id":7},"op":"delete","time":"2026-11-01T11:00:00Z"}`)},
		},
		{
			name: "composite key",
			out:  transform.Row("v", "user", "u1").And("sku", "s1").Apply(transform.Latest("qty", 3), transform.Min("first", t0)),
			want: transform.Record{Key: `{"sku":"s1","user":"u1"}`, EventTime: t0, Origin: origin,
				Payload: []byte(`{"view":"v","key":{"sku":"s1","user":"u1"},"op":"apply","time":"2026-11-01T10:00:00Z","columns":[{"column":"qty","merge":"latest","value":3},{"column":"first","merge":"min","value":"2026-11-01T10:00:00Z"}]}`)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := passThrough(tc.out).Process(in)
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			if len(recs) != 1 || !reflect.DeepEqual(recs[0], tc.want) {
				t.Errorf("Process returned %+v\nwant %+v", recs, tc.want)
			}
		})
	}
}

func TestProcessErrors(t *testing.T) {
	failing := errors.New("no such thing")
	tests := []struct {
		name    string
		tr      transform.Processor
		payload string
		is      error
	}{
		{name: "payload not JSON", tr: passThrough(), payload: "{", is: transform.ErrMalformed},
		{name: "payload null", tr: passThrough(), payload: "null", is: transform.ErrMalformed},
		{name: "payload not an object", tr: passThrough(), payload: "[1]", is: transform.ErrMalformed},
		{
			name: "function error",
			tr: transform.New(transform.JSON[map[string]any], func(transform.Input[map[string]any]) ([]transform.Output, error) {
				return nil, failing
			}),
			payload: "{}", is: failing,
		},
		{name: "value not encodable", tr: passThrough(transform.Row("v", "k", "x").Apply(transform.Set("f", math.NaN()))), payload: "{}"},
		{name: "value not a scalar", tr: passThrough(transform.Row("v", "k", "x").Apply(transform.Set("f", []int{1}))), payload: "{}"},
		{name: "apply without columns", tr: passThrough(transform.Row("v", "k", "x").Apply()), payload: "{}"},
		{name: "view without name", tr: passThrough(transform.Row("", "k", "x").Delete()), payload: "{}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := tc.tr.Process(transform.Message{Key: "k", Payload: []byte(tc.payload)})
			if err == nil {
				t.Fatalf("Process returned %v and no error", recs)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %q", err, tc.is)
			}
		})
	}
}

func TestOutputsCompareEqual(t *testing.T) {
	a := transform.Row("v", "k", "x").Apply(transform.Add("n", 1), transform.Max("t", t0))
	b := transform.Row("v", "k", "x").Apply(transform.Add("n", int64(1)), transform.Max("t", t0.In(time.FixedZone("CET", 3600))))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("equal operations built differently compare unequal:\n%v\n%v", a, b)
	}
	op, ok := a.ViewOp()
	if !ok || op.View != "v" || string(op.Key["k"]) != `"x"` {
		t.Errorf("ViewOp() = %+v, %v", op, ok)
	}
	if _, ok := transform.Emit("", 1).ViewOp(); ok {
		t.Errorf("a record reports a view operation")
	}
}

func TestJSONDecoderIgnoresUnknownFields(t *testing.T) {
	ev, err := transform.JSON[PageView]([]byte(`{"user":"u1","url":"/","extra":{"a":[1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := PageView{User: "u1", URL: "/"}
	if ev != want {
		t.Errorf("decoded %+v, want %+v", ev, want)
	}
	var syntax *json.SyntaxError
	if _, err := transform.JSON[PageView]([]byte(`{"user":`)); !errors.As(err, &syntax) {
		t.Errorf("truncated JSON gave %v, want a *json.SyntaxError", err)
	}
}

func TestContract(t *testing.T) {
	transformtest.Run(t, countViews,
		transform.Message{Key: "u1", EventTime: t0, Payload: []byte(`{"user":"u1","url":"/a"}`)},
		transform.Message{Key: "u2", EventTime: t0.Add(time.Second), Payload: []byte(`{"user":"u2","url":"/b"}`), Origin: origin},
	)
}

// TestProcessOpsHandsOverWhatProcessEncodes runs the contract suite's
// ProcessOps check over outputs at its edges: times in another zone, at
// zero, with a monotonic reading, outside what RFC 3339 holds (an error
// for both), keys and values that need escaping, composite keys, several
// operations of one input, records beside operations.
func TestProcessOpsHandsOverWhatProcessEncodes(t *testing.T) {
	zone := time.FixedZone("", 2*3600+30*60)
	in := transform.Message{Key: "u42", EventTime: t0, Payload: []byte(`{"a":1}`), Origin: origin}
	cases := map[string][]transform.Output{
		"a record and two operations on one row": {
			transform.Emit("", map[string]int{"n": 1}),
			transform.Row("v", "user", "u42").Apply(transform.Add("n", 1), transform.Max("last", t0)),
			transform.Row("v", "user", "u42").Apply(transform.Set("s", "x")),
		},
		"a time in another zone":           {transform.Row("v", "id", 7).Apply(transform.Latest("at", t0.In(zone))).At(t0.Add(time.Second).In(zone))},
		"a time with a monotonic reading":  {transform.Row("v", "id", 7).Delete().At(time.Now())},
		"a composite key with escapes":     {transform.Row("v", "b", "q\"uo\\te").And("a", "é\n").Apply(transform.Set("c", "\u2028<>&"), transform.Min("f", 1.5e300))},
		"a year that RFC 3339 cannot hold": {transform.Row("v", "id", 1).Delete().At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))},
		"a negative year":                  {transform.Row("v", "id", 1).Apply(transform.Add("n", -3)).At(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))},
	}
	for name, outs := range cases {
		t.Run(name, func(t *testing.T) {
			tr := passThrough(outs...)
			transformtest.CheckProcessOps(t, tr, in)
			recs, err := tr.ProcessOps(in)
			if err != nil {
				return // the same error as Process's, checked above
			}
			if !slices.ContainsFunc(recs, func(r transform.Record) bool { return r.Op != nil }) {
				t.Errorf("no view operation handed over")
			}
		})
	}
}
