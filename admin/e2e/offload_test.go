package e2e

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/ledger"
)

// TestBackfillReadsOffloadedLedger offloads the ledger's closed segments to
// the S3 server, then backfills user_activity from the very first event: the
// backfill reads history from tiered storage and must end identical to the
// live table and equal to the fold (issue 9).
func TestBackfillReadsOffloadedLedger(t *testing.T) {
	s := deployShop(t, "bfoffload")
	admin := s.pulsarAdmin(t)
	topic, err := utils.GetTopicName("persistent://" + s.tenant + "/ledger/events")
	if err != nil {
		t.Fatal(err)
	}
	events := generate(t, 6000, 31)
	for i := 0; i < len(events); i += 2000 {
		s.ingest(t, events[i:i+2000])
		// The live pipeline catches up first, so that the unload below
		// closes a segment rather than tests reconnection under load
		// (TestShopViewsSurviveTopicUnloads does that).
		s.waitForFold(t, 3*time.Minute)
		// Unloading the topic closes its segment: the next write opens another.
		if err := admin.Topics().Unload(*topic); err != nil {
			t.Fatalf("unloading %s: %v", topic, err)
		}
	}

	lopts := ledger.Options{Command: s.opts.Command, Wait: 5 * time.Minute}
	if _, err := ledger.Offload(t.Context(), lopts); err != nil {
		t.Fatalf("offloading the ledger: %v", err)
	}
	report, err := ledger.Status(t.Context(), lopts)
	if err != nil {
		t.Fatalf("reading ledger status: %v", err)
	}
	if len(report.Topics) != 1 || report.Topics[0].Offloaded.Segments < 3 || report.Topics[0].Offloaded.Entries == 0 {
		t.Fatalf("ledger status %+v, want the 3 closed segments offloaded", report.Topics)
	}

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.RequireIdentical = true
	opts.CopyAll = true // from the (offloaded) ledger, not the live stages' outputs
	res, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("backfilling user_activity over the offloaded ledger: %v", err)
	}
	if res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
		t.Fatalf("diff %+v, want the backfilled table identical to the live one", res.Diff)
	}
	s.waitForFold(t, time.Minute)
}
