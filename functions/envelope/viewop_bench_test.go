package envelope

import (
	"encoding/json"
	"testing"
)

// benchPayload is a user_activity purchase operation as the stage emits it.
var benchPayload = []byte(`{"view":"user_activity","key":{"user":"u42"},"op":"apply","time":"2026-11-01T10:00:00.123Z","columns":[{"column":"purchases","merge":"add","value":1},{"column":"spent_cents","merge":"add","value":3998},{"column":"last_seen","merge":"max","value":"2026-11-01T10:00:00.123Z"}]}`)

func BenchmarkDecodeViewOp(b *testing.B) {
	benchDecode(b, DecodeViewOp)
}

// BenchmarkDecodeViewOpReference is the encoding/json decoder that
// DecodeViewOp replaces, for comparison.
func BenchmarkDecodeViewOpReference(b *testing.B) {
	benchDecode(b, decodeReference)
}

func benchDecode(b *testing.B, decode func([]byte) (ViewOp, error)) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		if _, err := decode(benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	benchEncode(b, func(op ViewOp) ([]byte, error) { return op.AppendJSON(nil) })
}

// BenchmarkAppendJSONReference is json.Marshal, which AppendJSON replaces.
func BenchmarkAppendJSONReference(b *testing.B) {
	benchEncode(b, func(op ViewOp) ([]byte, error) { return json.Marshal(op) })
}

func benchEncode(b *testing.B, encode func(ViewOp) ([]byte, error)) {
	op, err := DecodeViewOp(benchPayload)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encode(op); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRowOpRoundTrip writes the benchmark's operation and reads it
// back, as JSON (a stage and the deployed sink) and in the local form (a
// local chain and the process that folds its operations).
func BenchmarkRowOpRoundTrip(b *testing.B) {
	op, err := DecodeRowOp(benchPayload)
	if err != nil {
		b.Fatal(err)
	}
	for _, form := range []struct {
		name   string
		encode func(RowOp, []byte) ([]byte, error)
		decode func([]byte) (RowOp, error)
	}{
		{"json", RowOp.AppendJSON, DecodeRowOp},
		{"local", RowOp.AppendLocal, DecodeLocalRowOp},
	} {
		b.Run(form.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				payload, err := form.encode(op, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := form.decode(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
