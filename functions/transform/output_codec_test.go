package transform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// encodeValueReference is encodeValue as it was, by encoding/json.
func encodeValueReference(v any) (json.RawMessage, error) {
	if t, ok := v.(time.Time); ok {
		v = t.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(v)
}

func genText(rng *rand.Rand) string {
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\x00", "\x1f", "\x7f", "é", "😀", "\u2028", "\u2029", "\xff", "\xe2\x80"}
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func TestEncodeValueMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	values := []any{"", "u42", true, false, 0, -1, int64(1 << 62), time.Time{},
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 1, time.UTC)}
	for range 2000 {
		values = append(values, genText(rng),
			time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("", rng.IntN(20)*1800-36000)))
	}
	for _, v := range values {
		got, err := encodeValue(v)
		want, wantErr := encodeValueReference(v)
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) {
			t.Fatalf("encodeValue(%#v) = %s, %v; want %s, %v", v, got, err, want, wantErr)
		}
	}
}

func TestRowMessageKeyMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	raws := []string{`""`, `"u42"`, `"a\"b"`, `"\u0041"`, "\"\xff\"", `1`, `true`, `null`, `"é"`}
	for range 2000 {
		b, _ := json.Marshal(genText(rng))
		raws = append(raws, string(b))
	}
	for _, raw := range raws {
		got := rowMessageKey([]envelope.KeyValue{{Column: "k", Value: json.RawMessage(raw)}})
		want := raw
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			want = s
		}
		if got != want {
			t.Fatalf("rowMessageKey of %s = %q, want %q", raw, got, want)
		}
	}
}

// TestEncodeMatchesJSON: the payload of every encoded view operation is
// json.Marshal of the operation.
func TestEncodeMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	in := Message{Key: "in", EventTime: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	for range 2000 {
		row := Row(genText(rng), genText(rng), genText(rng))
		if rng.IntN(3) == 0 {
			row = row.And("n", rng.Int64())
		}
		out := row.Apply(Add(genText(rng), rng.IntN(100)-50), Set(genText(rng), genText(rng)), Max("t", time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))), Latest("f", rng.Float64()))
		if rng.IntN(4) == 0 {
			out = row.Delete()
		}
		if rng.IntN(2) == 0 {
			out = out.At(time.Unix(rng.Int64N(4e9), 0).In(time.FixedZone("", 3600)))
		}
		rec, err := out.encode(in, true)
		op, _ := out.ViewOp()
		if op.EventTime.IsZero() {
			op.EventTime = in.EventTime
		}
		want, wantErr := json.Marshal(op)
		if wantErr == nil {
			wantErr = op.Validate()
		}
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || (err == nil && !bytes.Equal(rec.Payload, want)) {
			t.Fatalf("encoding %v: %s, %v; want %s, %v", out, rec.Payload, err, want, wantErr)
		}
	}
}

// appender is a record type with both encodings, the hand-written one
// failing where MarshalJSON fails.
type appender struct{ s string }

func (a appender) MarshalJSON() ([]byte, error) { return a.AppendJSON(nil) }

func (a appender) AppendJSON(b []byte) ([]byte, error) {
	if a.s == "" {
		return nil, errors.New("empty")
	}
	return append(b, `{"s":`+jsonQuote(a.s)+`}`...), nil
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestEmitUsesAppendJSON(t *testing.T) {
	for _, v := range []appender{{"x<y"}, {}} {
		want, wantErr := json.Marshal(v)
		out := Emit("k", v)
		if !bytes.Equal(out.Payload(), want) || fmt.Sprint(errors.Unwrap(out.Err())) != fmt.Sprint(wantErr) {
			t.Errorf("Emit(%#v) = %s, %v; want %s, %v", v, out.Payload(), out.Err(), want, wantErr)
		}
		if direct := EmitJSON("k", v); !reflect.DeepEqual(direct, out) {
			t.Errorf("EmitJSON(%#v) = %v, Emit %v", v, direct, out)
		}
	}
}
