package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/status"
)

// TestBackfillsShareWhatDidNotChange backfills both shop views, no grace
// for rollback: product_sales with a changed product-sales stage (only it
// and the sink are copied; dedup, validate and purchases are shared) and
// user_activity unchanged with the fused engine (only the sink is copied:
// the fused run reads user-activity's output, kept from the first event),
// both fused.
// Afterwards one function runs per stage of the manifests, no stage twice
// for one input; status shows each manifest stage deployed and
// running, under its name, with the function that runs it; plan has
// nothing to change. A third backfill, of product_sales with the same
// code, copies product-sales again rather than share the first one's copy
// (a fused run left no history in its output topic). Both views equal the
// fold of the ledger (under the changed rule for product_sales) as events
// keep arriving.
func TestBackfillsShareWhatDidNotChange(t *testing.T) {
	s := deployShop(t, "share")
	s.ingest(t, generate(t, 3000, 27))
	s.waitForFold(t, 3*time.Minute)
	ctx := t.Context()

	changed := manifestsWithBinary(t, "product-sales", ordersByUnits)
	sales := s.backfillOptions("product_sales", changed)
	sales.Grace, sales.GraceSet = 0, true
	sales.Engine = backfill.EngineFused
	if _, err := backfill.Run(ctx, sales, false); err != nil {
		t.Fatalf("backfilling product_sales: %v", err)
	}
	activity := s.backfillOptions("user_activity", changed)
	activity.Grace, activity.GraceSet = 0, true
	activity.Engine = backfill.EngineFused
	activity.RequireIdentical = true
	if _, err := backfill.Run(ctx, activity, false); err != nil {
		t.Fatalf("backfilling user_activity: %v", err)
	}

	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	for view, want := range map[string][2][]string{
		"product_sales": {{"dedup", "validate", "purchases"}, {"product-sales-bf-product_sales_v2", "product_sales_v2-sink"}},
		"user_activity": {{"dedup", "validate", "user-activity"}, {"user_activity_v2-sink"}},
	} {
		rec, err := store.ByTable(ctx, view, view+"_v2")
		if err != nil || rec == nil {
			t.Fatalf("the record of %s_v2: %v, %v", view, rec, err)
		}
		if !slices.Equal(stageNames(rec.Shares), want[0]) || !slices.Equal(stageNames(rec.Stages), want[1]) {
			t.Errorf("%s: shared %v, copied %v; want shared %v, copied %v", view, stageNames(rec.Shares), stageNames(rec.Stages), want[0], want[1])
		}
	}

	functions, err := mustClients(t, s.svc).Functions.GetFunctionsWithContext(ctx, s.tenant, pipelineNS)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(functions)
	// The shop's other views' stages, untouched, and the two views' paths
	// with what they share.
	others := []string{"enrich-purchases", "orders", "sku-refunds", "sku_page_views_before-declared", "sku_page_views_before_v1-sink", "sku_refunds_v1-sink",
		"sku_units_1d-declared", "sku_units_1d_v1-sink", "user_purchases_7d-declared", "user_purchases_7d_v1-sink"}
	want := slices.Sorted(slices.Values(append([]string{"dedup", "product-sales-bf-product_sales_v2", "product_sales_v2-sink", "purchases", "user-activity", "user_activity_v2-sink", "validate"}, others...)))
	if !slices.Equal(functions, want) {
		t.Errorf("functions running %v, want %v: one per stage, none twice", functions, want)
	}

	report, err := status.Get(ctx, status.Options{Command: target.Command{Dir: changed, Target: s.opts.Target, Services: s.svc}})
	if err != nil {
		t.Fatal(err)
	}
	runsAs := map[string]string{}
	for _, st := range report.Stages {
		if !st.Deployed || st.Running != st.Instances {
			t.Errorf("status: stage %s (runs as %q) deployed %v, %d/%d running", st.Name, st.RunsAs, st.Deployed, st.Running, st.Instances)
		}
		runsAs[st.Name] = strings.TrimPrefix(st.RunsAs, s.tenant+"/"+pipelineNS+"/")
	}
	wantRuns := map[string]string{"dedup": "", "validate": "", "user-activity": "", "purchases": "", "product-sales": "product-sales-bf-product_sales_v2",
		"product_sales_v1-sink": "product_sales_v2-sink", "user_activity_v1-sink": "user_activity_v2-sink"}
	for _, name := range others {
		wantRuns[name] = ""
	}
	if !maps.Equal(runsAs, wantRuns) {
		t.Errorf("status: stages run as %v, want %v", runsAs, wantRuns)
	}

	planOpts := s.opts
	planOpts.Dir = changed
	plan, err := deploy.MakePlan(ctx, planOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Pending()) != 0 || len(plan.CodeChanges) != 0 {
		t.Errorf("plan after both backfills: pending %+v, code changes %+v; want none", plan.Pending(), plan.CodeChanges)
	}

	// product_sales once more, the same code: its copy of product-sales
	// from the first backfill runs that code, but the fused run computed
	// the ledger's first 3000 events in one process and deployed the copy
	// after them, so its output topic holds only what came since. Shared,
	// it would make a table of the later events alone; it is copied again.
	sales.RequireIdentical = true
	if _, err := backfill.Run(ctx, sales, false); err != nil {
		t.Fatalf("backfilling product_sales again with the same code: %v", err)
	}
	again, err := store.ByTable(ctx, "product_sales", "product_sales_v3")
	if err != nil || again == nil {
		t.Fatalf("the record of product_sales_v3: %v, %v", again, err)
	}
	if copied, want := stageNames(again.Stages), []string{"product-sales-bf-product_sales_v3", "product_sales_v3-sink"}; !slices.Equal(copied, want) {
		t.Errorf("product_sales_v3 copied %v, want %v: a fused run's copy has no history in its output topic", copied, want)
	}

	s.ingest(t, generate(t, 1000, 28))
	fold := s.expected()
	for sku, row := range fold.ProductSales {
		row.Orders = row.Units // the changed rule
		fold.ProductSales[sku] = row
	}
	s.waitForResult(t, fold, 3*time.Minute)
}

// stageNames returns the names of a backfill record's stages, in order.
func stageNames(refs []backfillrecord.StageRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}
