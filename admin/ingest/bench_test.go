package ingest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/internal/testenv"
)

// BenchmarkLedgerCompression ingests the same shop events (foldline gen)
// into a ledger without compression and into one with the default (LZ4),
// then reads each from its first event with a plain reader, and reports
// what each stores and how fast each reads: the read is the limit every
// backfill figure is measured against, so the bench shows what the
// ledger's compression does to it.
//
//	FOLDLINE_BENCH_EVENTS=1000000 go test -run '^$' -bench LedgerCompression -benchtime 1x ./admin/ingest/
func BenchmarkLedgerCompression(b *testing.B) {
	n := testenv.EnvInt(b, "FOLDLINE_BENCH_EVENTS", 200_000)
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: n, Users: 300, SKUs: 40, Seed: 31, Malformed: 0.01}); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, compression := range []string{"none", ingest.DefaultCompression} {
			l := newLedger(b, true)
			start := time.Now()
			if _, err := ingest.Run(b.Context(), ingest.Options{Services: l.svc, Tenant: l.tenant, Files: []string{path}, Compression: compression}); err != nil {
				b.Fatalf("ingesting with %s: %v", compression, err)
			}
			ingestTime := time.Since(start)
			stored := l.storageSize(b)
			var reads []time.Duration
			for range 3 {
				d, _ := testenv.TimeRead(b, l.client, l.topic, n)
				reads = append(reads, d)
			}
			best := slices.Min(reads)
			b.Logf("%-4s: %d events (%d bytes of lines) stored in %d bytes; ingest %v (%.0f events/s); plain read %v %v %v, best %.0f events/s",
				compression, n, buf.Len(), stored, ingestTime.Round(10*time.Millisecond), float64(n)/ingestTime.Seconds(),
				reads[0].Round(10*time.Millisecond), reads[1].Round(10*time.Millisecond), reads[2].Round(10*time.Millisecond), float64(n)/best.Seconds())
			b.ReportMetric(float64(n)/best.Seconds(), compression+"-read-events/s")
			b.ReportMetric(float64(stored)/float64(n), compression+"-stored-B/event")
		}
	}
}
