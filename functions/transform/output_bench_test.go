package transform

import (
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

var benchAt = time.Date(2026, 11, 1, 10, 0, 0, 123e6, time.UTC)

var benchIn = Message{Key: "u42", EventTime: benchAt, Payload: []byte(`{}`), Origin: envelope.Origin{Topic: "persistent://shop/ledger/events-partition-3"}}

// BenchmarkEncodeViewOp encodes the user_activity operation of a purchase.
func BenchmarkEncodeViewOp(b *testing.B) {
	out := Row("user_activity", "user", "u42").Apply(Add("purchases", 1), Add("spent_cents", 3998), Max("last_seen", benchAt)).At(benchAt)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := out.encode(benchIn, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildAndEncodeViewOp adds the building of the operation, as a
// transformation's function does it for every event.
func BenchmarkBuildAndEncodeViewOp(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		out := Row("user_activity", "user", "u42").Apply(Add("page_views", 1), Max("last_seen", benchAt), Set("last_url", "/p/sku-7")).At(benchAt)
		if _, err := out.encode(benchIn, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRecord encodes a record built by EmitBytes.
func BenchmarkEncodeRecord(b *testing.B) {
	out := EmitBytes("sku-7", []byte(`{"qty":2}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := out.encode(benchIn, true); err != nil {
			b.Fatal(err)
		}
	}
}
