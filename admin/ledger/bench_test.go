package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/ledger"
	"github.com/foldline/foldline/internal/testenv"
)

// BenchmarkReadFromFirstEvent measures how fast a new reader at Earliest
// gets through the same events while their segments are in BookKeeper and
// after they were offloaded to the S3 server and deleted from BookKeeper,
// in one run: what a backfill's first pass costs in each case.
//
//	go test -run '^$' -bench ReadFromFirstEvent -benchtime 3x ./admin/ledger/
func BenchmarkReadFromFirstEvent(b *testing.B) {
	const events, segments = 40000, 4
	tl := newTestLedger(b, "ledger-bench", events, segments, 0)
	read := func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			got, took := tl.readAll(b, events)
			if len(got) != events {
				b.Fatalf("read %d events, want %d", len(got), events)
			}
			total += took
		}
		b.ReportMetric(float64(events)*float64(b.N)/total.Seconds(), "events/s")
	}
	b.Run("bookkeeper", read)

	if _, err := ledger.Offload(context.Background(), tl.opts); err != nil {
		b.Fatalf("offload: %v", err)
	}
	ids := offloadedLedgers(b, tl)
	if log := brokerLog(); log != "" {
		testenv.WaitFor(b, 3*time.Minute, "BookKeeper deleting the offloaded segments", func() bool {
			tl.trim(b)
			return len(stillInBookKeeper(b, log, ids)) == 0
		})
	}
	b.Run("offloaded", read)
}
