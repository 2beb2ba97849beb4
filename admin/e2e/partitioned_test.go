package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// partitionedStages are the shop's stages as PartitionedShopManifests
// deploys them, every one with partitionCount instances.
var partitionedStages = []string{"dedup", "validate", "user-activity", "purchases", "product-sales", "user_activity_v1-sink", "product_sales_v1-sink", "orders", "sku-refunds", "sku_refunds_v1-sink", "enrich-purchases"}

const partitionCount = 4

// TestPartitionedShopSurvivesKilledInstances runs the shop scaled out
// (issue 15, item 1): a ledger of 4 partitions keyed by user, every
// pipeline topic with 4 partitions, 4 instances of every function on
// failover subscriptions (one active instance per partition) and of every
// sink on key_shared ones (one writer per row); the declared views'
// functions and sinks, one instance each, read the partitioned topic of
// valid events. Between batches of events, while the stages still work
// through the last one, one instance of every stage in turn — the
// stateful dedup and sku-refunds, the declared views' functions and every
// sink included — is killed with kill -9. The views must equal the
// independent fold — product_sales and sku_refunds, re-keyed, gather every
// ledger partition, so an operation applied out of its partition's order
// would be skipped and show; the windowed views are read with GetAt and
// compared with the fold by event time — and every instance of every
// scaled-out stage must have done work (one partition each, not one
// instance doing all).
func TestPartitionedShopSurvivesKilledInstances(t *testing.T) {
	s := deployShopFrom(t, "parts", testenv.PartitionedShopManifests(t, partitionCount))
	for _, name := range partitionedStages {
		if n := len(testenv.InstancePIDs(t, s.tenant, pipelineNS, name)); n != partitionCount {
			t.Fatalf("%s runs %d instances, want %d", name, n, partitionCount)
		}
	}
	if !s.windowed {
		t.Fatal("the partitioned manifests declare no windowed views: nothing would check them")
	}
	rng := rand.New(rand.NewPCG(15, 1))
	events := generate(t, 12000, 15)
	const batch = 1500
	every := s.stageNames(t) // every function and sink, the declared views' too
	batches := (len(events) + batch - 1) / batch
	perBatch := (len(every) + batches - 1) / batches
	killed := 0
	for i := 0; i < len(events); i += batch {
		s.ingest(t, events[i:i+batch])
		for range perBatch {
			s.killOneInstance(t, every[killed%len(every)], rng)
			killed++
		}
	}
	if killed < len(every) {
		t.Fatalf("killed %d instances of %d stages: some stage was spared", killed, len(every))
	}
	s.waitForFold(t, 8*time.Minute)

	// A backfill of the re-keyed view copies its path with the same
	// partitions and instances, and replays it identically.
	opts := s.backfillOptions("product_sales", s.opts.Dir)
	opts.RequireIdentical = true
	opts.CopyAll = true // the whole path, partitions and all
	res, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("backfilling product_sales: %v", err)
	}
	if res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
		t.Fatalf("diff %+v, want identical non-empty tables", res.Diff)
	}
	// The fused engine reads the partitioned ledger itself and positions
	// the deployed copy's subscription on every partition.
	fused := s.backfillOptions("user_activity", s.opts.Dir)
	fused.RequireIdentical = true
	fused.Engine = backfill.EngineFused
	fused.CopyAll = true
	if res, err := backfill.Run(t.Context(), fused, false); err != nil {
		t.Fatalf("backfilling user_activity with the fused engine: %v", err)
	} else if res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
		t.Fatalf("fused diff %+v, want identical non-empty tables", res.Diff)
	}
	// The enrichment's path copied whole: dedup's and enrich-purchases'
	// states rebuilt from the partitioned ledger in tables of their own,
	// the declared view's function and sink, into an identical table.
	enriched := s.backfillOptions("sku_page_views_before", s.opts.Dir)
	enriched.RequireIdentical = true
	enriched.CopyAll = true
	enrichedRes, err := backfill.Run(t.Context(), enriched, false)
	if err != nil {
		t.Fatalf("backfilling sku_page_views_before: %v", err)
	}
	if enrichedRes.Diff == nil || !enrichedRes.Diff.Identical() || enrichedRes.Diff.NewRows == 0 {
		t.Fatalf("sku_page_views_before diff %+v, want identical non-empty tables", enrichedRes.Diff)
	}
	s.ingest(t, generate(t, 1000, 16))
	s.waitForFold(t, 3*time.Minute)

	pulsar, err := pulsarx.Connect(s.svc)
	if err != nil {
		t.Fatal(err)
	}
	stages := slices.Clone(partitionedStages)
	// The backfills' copies now serve two views (the old dedup and
	// validate stay for sku_refunds, which was not backfilled).
	suffix := manifest.ForkSuffix(res.Table)
	stages[3], stages[4], stages[6] = "purchases"+suffix, "product-sales"+suffix, res.Table+"-sink"
	uaSuffix := manifest.ForkSuffix("user_activity_v2")
	stages[0], stages[1], stages[2], stages[5] = "dedup"+uaSuffix, "validate"+uaSuffix, "user-activity"+uaSuffix, "user_activity_v2-sink"
	stages[10] = "enrich-purchases" + manifest.ForkSuffix(enrichedRes.Table)
	for _, name := range stages {
		stats, err := pulsar.Functions.GetFunctionStatsWithContext(t.Context(), s.tenant, pipelineNS, name)
		if err != nil {
			t.Fatalf("reading the stats of %s: %v", name, err)
		}
		var done []int64
		for _, inst := range stats.Instances {
			done = append(done, inst.Metrics.ProcessedSuccessfullyTotal)
		}
		t.Logf("%s: messages processed per instance since its last start: %v", name, done)
		if len(done) != partitionCount {
			t.Errorf("%s reports %d instances, want %d", name, len(done), partitionCount)
		}
	}
	// Every partition of every pipeline topic got events: the ledger's
	// split by key carried through the stages, routed by origin.
	for _, topic := range []string{"distinct", "valid", "purchases", "user-activity-ops", "orders", "sku-refunds-ops", "product-sales-ops", "purchases" + suffix, "product-sales-ops" + suffix, "enriched-purchases" + manifest.ForkSuffix(enrichedRes.Table)} {
		full := "persistent://" + s.tenant + "/" + pipelineNS + "/" + topic
		for p := range partitionCount {
			n, err := pulsarx.Entries(t.Context(), pulsar, partitionName(full, p))
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Errorf("partition %d of %s holds nothing", p, full)
			}
		}
	}
}

// killOneInstance sends SIGKILL to one instance of a stage, picked by rng,
// and waits until the worker has started it again.
func (s *shop) killOneInstance(t *testing.T, name string, rng *rand.Rand) {
	t.Helper()
	pids := testenv.InstancePIDs(t, s.tenant, pipelineNS, name)
	if len(pids) == 0 {
		t.Fatalf("no running instance of %s to kill", name)
	}
	victim := pids[rng.IntN(len(pids))]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("killing an instance of %s (pid %d): %v", name, victim, err)
	}
	t.Logf("killed one of %d instances of %s (pid %d)", len(pids), name, victim)
	testenv.WaitFor(t, 2*time.Minute, name+" restarted by the worker", func() bool {
		now := testenv.InstancePIDs(t, s.tenant, pipelineNS, name)
		return len(now) == len(pids) && !slices.Contains(now, victim)
	})
}

// partitionName names partition p of a partitioned topic.
func partitionName(topic string, p int) string {
	return fmt.Sprintf("%s-partition-%d", topic, p)
}
