package event

import (
	"encoding/json"
	"testing"
	"time"
)

var benchEvent = []byte(`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00.123Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999,"agent":"Mozilla/5.0"}`)

func BenchmarkParse(b *testing.B) { benchParse(b, Parse) }

// BenchmarkParseReference is the encoding/json reading that Parse replaces.
func BenchmarkParseReference(b *testing.B) { benchParse(b, parseReference) }

func benchParse(b *testing.B, parse func([]byte) (Event, error)) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchEvent)))
	for b.Loop() {
		if _, err := parse(benchEvent); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseMalformed(b *testing.B) {
	bad := []byte(`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":"2","price_cents":1999}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bad); err == nil {
			b.Fatal("accepted")
		}
	}
}

var benchEv = Event{ID: "e-3", Type: Purchase, User: "u42", Time: time.Date(2026, 11, 1, 10, 0, 0, 123e6, time.UTC), Order: "o-1", SKU: "sku-7", Qty: 2, PriceCents: 1999}

// BenchmarkMarshal is json.Marshal of an event, as transform.Emit did it.
func BenchmarkMarshal(b *testing.B) {
	benchMarshal(b, func(e Event) ([]byte, error) { return json.Marshal(e) })
}

func BenchmarkAppendJSON(b *testing.B) {
	benchMarshal(b, func(e Event) ([]byte, error) { return e.AppendJSON(nil) })
}

// BenchmarkMarshalReference is the struct-based encoding that MarshalJSON
// replaces.
func BenchmarkMarshalReference(b *testing.B) { benchMarshal(b, marshalReference) }

func benchMarshal(b *testing.B, marshal func(Event) ([]byte, error)) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := marshal(benchEv); err != nil {
			b.Fatal(err)
		}
	}
}
