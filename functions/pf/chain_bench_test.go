package pf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/pf/localwire"
)

// BenchmarkLocalChain is the runtime's own work per ledger event in a local
// chain of two functions (the fused backfill's chain process): reading the
// input frame, two handler calls that each pass one record on, the origin
// of each output, the hand-over between them and the output frame. The
// handlers do nothing, so what it measures is the runtime's; one op is one
// ledger event of about 100 bytes with one property.
//
//	go test -run '^$' -bench LocalChain -benchmem ./functions/pf/
func BenchmarkLocalChain(b *testing.B) {
	confs := chainTestConfs()
	args := []string{LocalFlag, "-instance-conf", confs[0], "-instance-conf", confs[1]}
	pass := func(_ context.Context, in []byte) ([]Record, error) { return []Record{{Payload: in}}, nil }
	const n = 10000
	var input bytes.Buffer
	w := localwire.NewWriter(&input)
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i := range n {
		payload := fmt.Appendf(nil, `{"id":"e%07d","type":"page_view","user":"u%03d","time":"2026-12-05T10:00:00.%03dZ","url":"/p/%d"}`, i, i%300, i%1000, i%40)
		if err := w.Input(&localwire.Input{Seq: uint64(i + 1), Topic: "persistent://t/n/ledger", Ledger: 7, Entry: int64(i / 500), Batch: int64(i % 500),
			Key: "k", Payload: payload, Properties: map[string]string{"app": "shop"}, EventTime: at, PublishTime: at}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := runChain(b.Context(), []any{pass, pass}, args, bytes.NewReader(input.Bytes()), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	b.ReportMetric(0, "ns/op")
}
