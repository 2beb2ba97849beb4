package envelope

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope/jsonwire/jsonwiretest"
)

// decodeReference is DecodeViewOp as it was before the fast path: the
// definition the fast path must match.
func decodeReference(payload []byte) (ViewOp, error) {
	var op ViewOp
	if err := json.Unmarshal(payload, &op); err != nil {
		return ViewOp{}, fmt.Errorf("decoding view operation: %w", err)
	}
	if err := op.Validate(); err != nil {
		return ViewOp{}, err
	}
	return op, nil
}

// checkDecode fails t unless DecodeViewOp and the reference agree on
// payload, and unless the fast path, when it takes the payload, reads what
// json.Unmarshal reads.
func checkDecode(t *testing.T, payload []byte) {
	t.Helper()
	got, gotErr := DecodeViewOp(payload)
	want, wantErr := decodeReference(payload)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeViewOp(%q)\n got  %#v, %v\n want %#v, %v", payload, got, gotErr, want, wantErr)
	}
	row, rowErr := DecodeRowOp(payload)
	if fmt.Sprint(rowErr) != fmt.Sprint(wantErr) || rowErr == nil && !reflect.DeepEqual(row.ViewOp(), want) {
		t.Fatalf("DecodeRowOp(%q)\n got  %#v, %v\n want %#v, %v", payload, row, rowErr, want, wantErr)
	}
	if rowErr == nil && !slices.IsSortedFunc(row.Key, func(x, y KeyValue) int { return strings.Compare(x.Column, y.Column) }) {
		t.Fatalf("DecodeRowOp(%q) key %v is not sorted", payload, row.Key)
	}
	if fast, ok := decodeRowOp(payload, true); ok {
		var ref ViewOp
		if err := json.Unmarshal(payload, &ref); err != nil || !reflect.DeepEqual(fast.ViewOp(), ref) {
			t.Fatalf("fast path took %q as %#v; json.Unmarshal gives %#v, %v", payload, fast, ref, err)
		}
	}
}

// checkEncode fails t unless AppendJSON writes what json.Marshal writes, or
// fails as it fails.
func checkEncode(t *testing.T, op ViewOp) {
	t.Helper()
	want, wantErr := json.Marshal(op)
	got, gotErr := op.AppendJSON([]byte("prefix"))
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("AppendJSON(%#v) error %v, json.Marshal %v", op, gotErr, wantErr)
	}
	if wantErr == nil && string(got) != "prefix"+string(want) {
		t.Fatalf("AppendJSON(%#v)\n got  %s\n want prefix%s", op, got, want)
	}
}

func TestDecodeViewOpEdgeCases(t *testing.T) {
	const valid = `{"view":"v","key":{"k":"x"},"op":"apply","time":"2026-11-01T10:00:00Z","columns":[{"column":"c","merge":"add","value":1}]}`
	cases := []string{
		valid,
		" \t\r\n" + valid + " \n",
		`{ "columns" : [ { "value" : 1 , "merge" : "add" , "column" : "c" } ] , "time" : "2026-11-01T10:00:00Z" , "op" : "apply" , "key" : { "k" : "x" } , "view" : "v" }`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00Z"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00Z","columns":[]}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00Z","columns":null}`,
		`{"view":"v","key":{"k":"x"},"op":"delete"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":null}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00.123456789+05:30"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00+05:30:00"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01 10:00:00Z"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":"2026-11-01T10:00:00\u005a"}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":1}`,
		`{"view":"v","key":{"k":"x"},"op":"delete","time":{}}`,
		`{"view":null,"key":{"k":"x"},"op":"delete"}`,
		`{"view":"v","key":null,"op":"delete"}`,
		`{"view":"v","key":{},"op":"delete"}`,
		`{"view":"v","key":{"k":null},"op":"delete"}`,
		`{"view":"v","key":{"k":{"a": [1, 2 ,{}]}},"op":"delete"}`,
		`{"view":"v","key":{"k":1,"k":2},"op":"delete"}`,
		`{"view":"v","key":{"b":1,"a":2,"b":3,"c":4,"a":5},"op":"delete"}`,
		`{"view":"v","key":{"c":1,"b":2,"a":3},"op":"delete"}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"latest","value":1},{"column":"d","merge":"min","value":1},{"column":"e","merge":"set","value":1},{"column":"f","merge":"max","value":1},{"column":"g","merge":"add","value":1}]}`,
		`{"view":"v","key":{"k\u00e9\n":1,"":true},"op":"delete"}`,
		`{"view":"v","key":{"k\xff":1},"op":"delete"}`,
		`{"view":"v","key":"k","op":"delete"}`,
		`{"view":"v","key":[],"op":"delete"}`,
		`{"view":"v","key":{"k":1},"op":null}`,
		`{"view":"v","key":{"k":1},"op":"upsert"}`,
		`{"view":"v","key":{"k":1},"op":"apply"}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[null]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[1]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":{}}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add"}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add","value":null}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"sum","value":1}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"","merge":"add","value":1}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add","value":1,"extra":[{"x":null}]}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add","value":1,"value":2}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add","value":1}],"columns":[{"column":"d"}]}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"Column":"c","MERGE":"add","value":1}]}`,
		`{"VIEW":"v","Key":{"k":1},"oP":"delete"}`,
		`{"view":"v","\u212aey":{"k":1},"op":"delete"}`,
		`{"view":"v","\u006bey":{"k":1},"op":"delete"}`,
		`{"view":"v","key":{"k":1},"op":"delete","unknown":{"deep":[[[[1]]]],"s":"\"\\\/\b\f\n\r\t\u0000"}}`,
		`{"view":"v\u0000\ud83d\ude00\ud800<>&","key":{"k":1},"op":"delete"}`,
		`{"view":"v","key":{"k":-0.5e-7},"op":"delete"}`,
		`{"view":"v","key":{"k":01},"op":"delete"}`,
		`{"view":"v","key":{"k":1.},"op":"delete"}`,
		`{"view":"v","key":{"k":-},"op":"delete"}`,
		`{"view":"v","key":{"k":1e},"op":"delete"}`,
		`{"view":"v","key":{"k":tru},"op":"delete"}`,
		`{"view":"v","key":{"k":"a` + "\t" + `b"},"op":"delete"}`,
		`{"view":"v","key":{"k":"\x"},"op":"delete"}`,
		`{"view":"v","key":{"k":"\u12"},"op":"delete"}`,
		`{"view":"v","key":{"k":1},"op":"delete",}`,
		`{"view":"v","key":{"k":1},"op":"delete"}x`,
		`{"view":"v","key":{"k":1},"op":"delete"}{}`,
		`{"view":"v","key":{"k":1,},"op":"delete"}`,
		`{"view":"v","key":{"k":1},"op":"apply","columns":[{"column":"c","merge":"add","value":1},]}`,
		`{"view":"v","key":{"k":1} "op":"delete"}`,
		`{"view" "v"}`,
		`{"view":"v","key":{"k":1},"op":"delete"`,
		`{"view":"v","key":{"k":1},"op":"del`,
		"\xef\xbb\xbf" + valid,
		`null`, ` null `, `nul`, `[]`, `"view"`, `1`, `true`, `{}`, ``, ` `, `{`, `}`, `{"":1}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
		`{"view":"v","key":{"k":1},"op":"delete","x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
		`{"view":"v","key":{"k":1},"op":"delete","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	}
	for _, c := range cases {
		checkDecode(t, []byte(c))
	}
	if _, ok := decodeRowOp([]byte(cases[1]), false); !ok {
		t.Errorf("the fast path left a plain payload to encoding/json")
	}
}

func TestAppendJSONEdgeCases(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 120e6, time.UTC)
	base := ViewOp{View: "v", Key: map[string]json.RawMessage{"k": json.RawMessage(`"x"`)}, Kind: OpApply, EventTime: at,
		Columns: []ColumnOp{{Column: "c", Merge: MergeAdd, Value: json.RawMessage(`1`)}}}
	with := func(f func(*ViewOp)) ViewOp {
		op := base
		op.Key = map[string]json.RawMessage{"k": json.RawMessage(`"x"`)}
		op.Columns = []ColumnOp{{Column: "c", Merge: MergeAdd, Value: json.RawMessage(`1`)}}
		f(&op)
		return op
	}
	ops := []ViewOp{
		base,
		{},
		with(func(op *ViewOp) { op.Key = nil; op.Columns = nil }),
		with(func(op *ViewOp) { op.Key = map[string]json.RawMessage{}; op.Columns = []ColumnOp{} }),
		with(func(op *ViewOp) {
			op.Key["a"] = nil
			op.Key["z"] = json.RawMessage(`true`)
			op.Key["é<"] = json.RawMessage(`-1.5e3`)
		}),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage(` 1`) }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage(`{"a": 1}`) }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage(`"<a&b>"`) }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage("\"\u2028\"") }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage("\"\xff\"") }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage(`01`) }),
		with(func(op *ViewOp) { op.Key["k"] = json.RawMessage{} }),
		with(func(op *ViewOp) { op.Columns[0].Value = nil }),
		with(func(op *ViewOp) { op.Columns[0].Value = json.RawMessage(`nope`) }),
		with(func(op *ViewOp) { op.Columns[0].Value = json.RawMessage("1\n") }),
		with(func(op *ViewOp) {
			op.View = "v\"\\\x00\x1f\x7f<>&\u2028\u2029\xff\xe2\x80é😀"
			op.Kind = "\b\f\n\r\t"
		}),
		with(func(op *ViewOp) {
			op.Columns = append(op.Columns, ColumnOp{Column: "d", Merge: "weird\xc3", Value: json.RawMessage(`"s"`)})
		}),
		with(func(op *ViewOp) { op.EventTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 5*3600+30*60)) }),
		with(func(op *ViewOp) {
			op.EventTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 5*3600+30*60+7))
		}),
		with(func(op *ViewOp) { op.EventTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(op *ViewOp) { op.EventTime = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(op *ViewOp) { op.EventTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 30*3600)) }),
	}
	for _, op := range ops {
		checkEncode(t, op)
	}
}

// TestViewOpCodecGenerated checks many generated operations both ways, and
// their payloads re-spaced, reordered, renamed, extended, escaped and
// damaged.
func TestViewOpCodecGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 500
	}
	fast := 0
	for range n {
		op := genViewOp(rng)
		checkEncode(t, op)
		payload, err := json.Marshal(op)
		if err != nil {
			continue
		}
		if _, ok := decodeRowOp(payload, true); ok {
			fast++
		}
		checkDecode(t, payload)
		for _, p := range jsonwiretest.Variants(rng, payload) {
			checkDecode(t, p)
		}
	}
	if fast < n*9/10 {
		t.Errorf("the fast path took %d of %d canonical payloads", fast, n)
	}
}

func genViewOp(rng *rand.Rand) ViewOp {
	op := ViewOp{View: genString(rng), Kind: pick(rng, OpApply, OpDelete, OpApply, "", "upsert")}
	if rng.IntN(10) > 0 {
		op.Key = map[string]json.RawMessage{}
		for range rng.IntN(4) {
			op.Key[genString(rng)] = genRaw(rng)
		}
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", -7*3600), time.FixedZone("", 5*3600+45*60)}
	op.EventTime = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))])
	if rng.IntN(20) == 0 {
		op.EventTime = time.Time{}
	}
	for range rng.IntN(5) {
		op.Columns = append(op.Columns, ColumnOp{
			Column: genString(rng),
			Merge:  pick(rng, MergeSet, MergeAdd, MergeMax, MergeMin, MergeLatest, "", "sum"),
			Value:  genRaw(rng),
		})
	}
	return op
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func genString(rng *rand.Rand) string {
	if rng.IntN(3) > 0 {
		return pick(rng, "user_activity", "u42", "page_views", "last_seen", "sku-7", "")
	}
	alphabet := []string{"a", "Z", "0", "_", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "😀", "\u2028", "\u2029", "\xff", "\xe2\x80"}
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(pick(rng, alphabet...))
	}
	return b.String()
}

func genRaw(rng *rand.Rand) json.RawMessage {
	switch rng.IntN(8) {
	case 0:
		return json.RawMessage(fmt.Sprint(rng.Int64N(1e12) - 5e11))
	case 1:
		return json.RawMessage(pick(rng, "0", "-0", "1.5", "-2e10", "3E+2", "1e-7", "true", "false", "null"))
	case 2:
		b, _ := json.Marshal(genString(rng))
		return b
	case 3:
		return nil
	case 4:
		return json.RawMessage(pick(rng, `{"a":[1,2]}`, `[]`, ` 1`, `"\u0041"`, "\"\u2028\"", `"<b>"`))
	default:
		b, _ := json.Marshal(time.Unix(rng.Int64N(4e9), 0).UTC().Format(time.RFC3339Nano))
		return b
	}
}

// FuzzViewOpCodec: DecodeViewOp matches encoding/json on any input, and
// AppendJSON matches json.Marshal on whatever encoding/json decodes.
func FuzzViewOpCodec(f *testing.F) {
	f.Add([]byte(`{"view":"user_activity","key":{"user":"u42"},"op":"apply","time":"2026-11-01T10:00:00.123Z","columns":[{"column":"purchases","merge":"add","value":1},{"column":"last_seen","merge":"max","value":"2026-11-01T10:00:00.123Z"}]}`))
	f.Add([]byte(`{"view":"product_sales","key":{"sku":"sku-7","day":20261101},"op":"delete","time":"2026-11-01T10:00:00+01:00"}`))
	f.Add([]byte(` { "VIEW" : "v\u00e9" , "key" : { "k" : null } , "op" : "apply" , "columns" : [ null , { "value" : [ 1 ] } ] , "x" : {} } `))
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkDecode(t, payload)
		var op ViewOp
		if json.Unmarshal(payload, &op) == nil {
			checkEncode(t, op)
		}
	})
}

// A usual operation, its names seen before, decodes with one allocation
// (its key and columns), and DecodeViewOp's values do not share the
// payload's bytes, which the caller may reuse.
func TestDecodeRowOpAllocations(t *testing.T) {
	if _, err := DecodeRowOp(benchPayload); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeRowOp(benchPayload) }); n > 1 {
		t.Errorf("DecodeRowOp allocated %v times, want at most 1", n)
	}
	payload := []byte(`{"view":"v","key":{"k":"x"},"op":"apply","columns":[{"column":"c","merge":"add","value":1}]}`)
	op, err := DecodeViewOp(payload)
	if err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = ' '
	}
	if string(op.Key["k"]) != `"x"` || string(op.Columns[0].Value) != "1" {
		t.Errorf("DecodeViewOp's values changed with the payload: %s %s", op.Key["k"], op.Columns[0].Value)
	}
}

func TestNameTableStopsAtItsLimit(t *testing.T) {
	names := newNameTable(2)
	for _, n := range []string{"a", "b", "c", "a", strings.Repeat("x", maxNameBytes+1)} {
		names.add(n)
	}
	for n, want := range map[string]bool{"a": true, "b": true, "c": false, strings.Repeat("x", maxNameBytes+1): false} {
		if got, ok := names.lookup([]byte(n)); ok != want || ok && got != n {
			t.Errorf("lookup(%.8q) = %q, %v; want held %v", n, got, ok, want)
		}
	}
}
