package envelope

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// checkLocal checks that op's local payload decodes to what its JSON
// decodes to (the event time in UTC), or fails as the JSON fails, and that
// a usual operation takes the local form at all.
func checkLocal(t *testing.T, op RowOp) (local bool) {
	t.Helper()
	want, jsonErr := func() (RowOp, error) {
		payload, err := op.AppendJSON(nil)
		if err != nil {
			return RowOp{}, err
		}
		return DecodeRowOp(payload)
	}()
	payload, err := op.AppendLocal(nil)
	if err != nil {
		if jsonErr == nil {
			t.Fatalf("AppendLocal(%+v): %v; its JSON encodes", op, err)
		}
		return false
	}
	local = payload[0] == localMagic
	got, err := DecodeLocalRowOp(payload)
	if (err == nil) != (jsonErr == nil) {
		t.Fatalf("%+v: local decoding gives error %v, JSON %v", op, err, jsonErr)
	}
	if err != nil {
		if local && err.Error() != jsonErr.Error() {
			t.Errorf("%+v: local error %q, JSON %q", op, err, jsonErr)
		}
		return local
	}
	if !got.EventTime.Equal(want.EventTime) {
		t.Fatalf("%+v: local time %v, JSON %v", op, got.EventTime, want.EventTime)
	}
	if local {
		want.EventTime = want.EventTime.UTC()
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v:\nlocal %+v\nJSON  %+v", op, got, want)
	}
	return local
}

func TestLocalRowOpGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 5000
	if testing.Short() {
		n = 500
	}
	local := 0
	for range n {
		vo := genViewOp(rng)
		if checkLocal(t, vo.RowOp()) {
			local++
		}
		// As a transformation builds it: the key sorted and unique.
		usual := RowOp{View: "user_activity", Key: []KeyValue{{Column: "user", Value: json.RawMessage(`"u42"`)}}, Kind: OpApply,
			EventTime: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(),
			Columns:   []ColumnOp{{Column: "events", Merge: MergeAdd, Value: json.RawMessage(`1`)}, {Column: "last_seen", Merge: MergeLatest, Value: genRaw(rng)}}}
		if !checkLocal(t, usual) && canonical(usual.Columns[1].Value) {
			t.Fatalf("a usual operation took its JSON form: %+v", usual)
		}
	}
	if local < n/10 { // most generated ones hold a value JSON rewrites
		t.Errorf("only %d of %d generated operations took the local form", local, n)
	}
}

func TestLocalRowOpEdgeCases(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 120, time.UTC)
	base := func() RowOp {
		return RowOp{View: "v", Key: []KeyValue{{Column: "a", Value: json.RawMessage(`1`)}, {Column: "b", Value: nil}}, Kind: OpApply, EventTime: at,
			Columns: []ColumnOp{{Column: "c", Merge: MergeLatest, Value: json.RawMessage(`"x"`)}}}
	}
	with := func(f func(*RowOp)) RowOp { op := base(); f(&op); return op }
	for _, c := range []struct {
		op    RowOp
		local bool
	}{
		{base(), true},
		{RowOp{}, false},
		{with(func(op *RowOp) { op.Kind = OpDelete; op.Columns = nil }), true},
		{with(func(op *RowOp) { op.Kind = OpDelete }), true}, // fails Validate either way
		{with(func(op *RowOp) { op.Key = nil }), true},
		{with(func(op *RowOp) { op.Key[0], op.Key[1] = op.Key[1], op.Key[0] }), false},
		{with(func(op *RowOp) { op.Key[1].Column = "a" }), false},
		{with(func(op *RowOp) { op.Key[0].Value = json.RawMessage(`"<"`) }), false},
		{with(func(op *RowOp) { op.Columns[0].Value = json.RawMessage(`[1]`) }), false},
		{with(func(op *RowOp) { op.Columns[0].Column = "\xff" }), false},
		{with(func(op *RowOp) { op.Columns[0].Merge = "sum" }), false},
		{with(func(op *RowOp) { op.View = "v\"\\\n😀" }), true},
		{with(func(op *RowOp) { op.EventTime = time.Time{} }), true},
		{with(func(op *RowOp) { op.EventTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 5*3600)) }), true},
		{with(func(op *RowOp) { op.EventTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), false},
	} {
		payload, err := c.op.AppendLocal(nil)
		if got := err == nil && payload[0] == localMagic; got != c.local {
			t.Errorf("%+v: local form %v, want %v", c.op, got, c.local)
		}
		checkLocal(t, c.op)
	}
}

// A local payload that is not what AppendLocal writes is refused, with
// ErrLocalOp, however it is damaged; none panics.
func TestDecodeLocalRowOpRefusesDamage(t *testing.T) {
	good, err := RowOp{View: "v", Key: []KeyValue{{Column: "k", Value: json.RawMessage(`"x"`)}}, Kind: OpApply, EventTime: time.Unix(1, 2),
		Columns: []ColumnOp{{Column: "c", Merge: MergeAdd, Value: json.RawMessage(`1`)}}}.AppendLocal(nil)
	if err != nil || good[0] != localMagic {
		t.Fatalf("AppendLocal: %q, %v", good, err)
	}
	if _, err := DecodeLocalRowOp(good); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(good); n++ {
		if _, err := DecodeLocalRowOp(good[:n]); !errors.Is(err, ErrLocalOp) {
			t.Errorf("cut to %d bytes: %v", n, err)
		}
	}
	for _, bad := range [][]byte{
		append(append([]byte{}, good...), 0),         // a byte too many
		{localMagic, 1, 'v', 9},                      // kind code 9
		{localMagic, 1, 0xff, 1, 0, 0, 0, 0},         // a name not UTF-8
		{localMagic, 1, 'v', 1, 0, 0, 0xff, 0xff, 3}, // more key columns than bytes
	} {
		if _, err := DecodeLocalRowOp(bad); !errors.Is(err, ErrLocalOp) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A value that is not canonical JSON, a key out of order, a second too long.
	for _, op := range []RowOp{
		{View: "v", Key: []KeyValue{{Column: "k", Value: json.RawMessage(` 1`)}}, Kind: OpDelete},
		{View: "v", Key: []KeyValue{{Column: "k", Value: json.RawMessage(`1`)}, {Column: "a", Value: json.RawMessage(`1`)}}, Kind: OpDelete},
	} {
		payload := []byte{localMagic}
		payload = appendLocalString(payload, op.View)
		payload = append(payload, 2, 0, 0, byte(len(op.Key)))
		for _, k := range op.Key {
			payload = appendLocalValue(appendLocalString(payload, k.Column), k.Value)
		}
		payload = append(payload, 0)
		if _, err := DecodeLocalRowOp(payload); !errors.Is(err, ErrLocalOp) {
			t.Errorf("%+v: %v", op, err)
		}
	}
	if _, err := DecodeLocalRowOp([]byte{localMagic, 1, 'v', 2, 0, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0, 0}); !errors.Is(err, ErrLocalOp) {
		t.Errorf("a nanosecond count of a second or more: %v", err)
	}
}

// FuzzDecodeLocalRowOp: any input decodes or fails without a panic, and an
// operation it decodes encodes to the same operation again.
func FuzzDecodeLocalRowOp(f *testing.F) {
	good, _ := RowOp{View: "user_activity", Key: []KeyValue{{Column: "user", Value: json.RawMessage(`"u42"`)}}, Kind: OpApply, EventTime: time.Unix(1764900000, 5),
		Columns: []ColumnOp{{Column: "events", Merge: MergeAdd, Value: json.RawMessage(`1`)}}}.AppendLocal(nil)
	f.Add(good)
	f.Add([]byte{localMagic})
	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) == 0 || payload[0] != localMagic {
			payload = append([]byte{localMagic}, payload...)
		}
		op, err := DecodeLocalRowOp(payload)
		if err != nil {
			return
		}
		again, err := op.AppendLocal(nil)
		if err != nil {
			t.Fatalf("%q decodes to %+v, which does not encode: %v", payload, op, err)
		}
		op2, err := DecodeLocalRowOp(again)
		if err != nil || !reflect.DeepEqual(op, op2) {
			t.Fatalf("%q: %+v, then %+v (%v)", payload, op, op2, err)
		}
	})
}
