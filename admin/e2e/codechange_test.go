package e2e

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/internal/testenv"
)

// ordersByUnits is a changed product-sales stage (functions/examples/testdata/ordersbyunits:
// orders count units).
const ordersByUnits = "github.com/foldline/foldline/functions/examples/testdata/ordersbyunits"

// TestDeployNeverChangesAViewsCodeSilently deploys the shop, then the
// manifests with product-sales' binary changed: plan names the change and
// the table it would make inexact, deploy refuses it and changes nothing,
// deploy --in-place updates the function and the registry records, for
// product_sales_v1, the code that built it and the in-place change with the
// ledger position where it took effect, which views describe shows; a plan
// afterwards has nothing more to say.
func TestDeployNeverChangesAViewsCodeSilently(t *testing.T) {
	s := deployShop(t, "code")
	s.ingest(t, generate(t, 1000, 31))
	s.waitForFold(t, 3*time.Minute)
	ctx := t.Context()

	opts := s.opts
	opts.Dir = manifestsWithBinary(t, "product-sales", ordersByUnits)
	plan, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	plan.Write(&text, false)
	t.Logf("plan:\n%s", text.String())
	const sentence = "product-sales's binary changed: product_sales_v1 would no longer equal the fold of the ledger under the new code"
	if len(plan.CodeChanges) != 1 || plan.CodeChanges[0].Sentence() != sentence || !plan.CodeChanges[0].InPlace || !strings.Contains(text.String(), sentence) {
		t.Fatalf("plan's code changes %+v; want one, in place: %q", plan.CodeChanges, sentence)
	}

	binary := func() string {
		conf, err := mustClients(t, s.svc).Functions.GetFunctionWithContext(ctx, s.tenant, pipelineNS, "product-sales")
		if err != nil {
			t.Fatal(err)
		}
		return conf.UserConfig[deploy.UserConfigBinary].(string)
	}
	before := binary()
	res, err := deploy.Deploy(ctx, opts)
	if !errors.Is(err, deploy.ErrCodeChange) || !strings.Contains(err.Error(), "foldline backfill product_sales") {
		t.Fatalf("deploy of a changed binary: %v, want ErrCodeChange naming foldline backfill product_sales", err)
	}
	if len(res.Applied) != 0 || binary() != before {
		t.Fatalf("a refused deploy applied %d changes (binary %s, was %s)", len(res.Applied), binary(), before)
	}

	ledger := ingest.DefaultTopic(s.tenant)
	opts.InPlace = true
	if _, err := deploy.Deploy(ctx, opts); err != nil {
		t.Fatalf("deploy --in-place: %v", err)
	}
	if binary() == before {
		t.Fatal("deploy --in-place left the old binary")
	}
	history, err := registry.History(ctx, s.session, s.keyspace, "product_sales")
	if err != nil {
		t.Fatal(err)
	}
	events := history["product_sales_v1"]
	if len(events) != 2 || events[0].Kind != registry.EventBuilt || events[1].Kind != registry.EventInPlace {
		t.Fatalf("history of product_sales_v1: %+v; want built, then in-place", events)
	}
	change := events[1]
	if len(change.Stages) != 1 || change.Stages[0].Stage != "product-sales" || change.Stages[0].Binary == before || change.By != "deploy --in-place" {
		t.Errorf("the in-place change records %+v by %q, want product-sales's new binary by deploy --in-place", change.Stages, change.By)
	}
	if change.Positions[ledger] == "" {
		t.Errorf("the in-place change records positions %v, want the last entry of %s", change.Positions, ledger)
	}
	others, err := registry.History(ctx, s.session, s.keyspace, "user_activity")
	if err != nil {
		t.Fatal(err)
	}
	if other := others["user_activity_v1"]; len(other) != 1 || other[0].Kind != registry.EventBuilt {
		t.Errorf("history of user_activity_v1: %+v; want it built, and nothing in place (product-sales does not feed it)", other)
	}

	d, err := views.Describe(ctx, views.Options{Command: opts.Command}, "product_sales")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 1 || d.History[0].InPlaceChanges != 1 {
		t.Errorf("describe's history %+v, want product_sales_v1 with 1 in-place change", d.History)
	}
	text.Reset()
	d.Write(&text, time.Now())
	if !strings.Contains(text.String(), "code changed in place by deploy --in-place after ledger position "+ledger+" "+change.Positions[ledger]) {
		t.Errorf("describe:\n%s\nwant the in-place change at %s", text.String(), change.Positions[ledger])
	}

	again, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.CodeChanges) != 0 || len(again.Pending()) != 0 {
		t.Errorf("plan after deploy --in-place: code changes %+v, pending %+v; want none", again.CodeChanges, again.Pending())
	}
}

// TestDeployBackfillsEveryViewACodeChangeConcerns changes validate's config
// (a key its code reads, as far as deploy can tell: it feeds both views)
// and runs deploy --backfill: product_sales is backfilled with a copy of
// the path from validate on (dedup shared), then user_activity shares that
// copy's validate (same code, kept from the first event) and copies
// user-activity, which the manifests' user-activity could not stand in for
// (it reads the old validate's output). product_sales is backfilled with
// the deployed engine, since its copies are shared later, user_activity
// fused. With no rollback grace, seven
// functions are left, dedup and the new validate once each; the plan has
// nothing more to change, and both views equal the fold.
func TestDeployBackfillsEveryViewACodeChangeConcerns(t *testing.T) {
	// The shop's two views written in Go, and their path: validate feeds
	// the other views too, which would only lengthen the test.
	goViews := func() string {
		dir := testenv.ShopManifests(t)
		dropFromShop(t, dir, []string{"sku_refunds", "user_purchases_7d", "sku_units_1d", "sku_page_views_before"}, []string{"orders", "sku-refunds", "enrich-purchases"})
		return dir
	}
	s := deployShopFrom(t, "codebf", goViews())
	s.ingest(t, generate(t, 2000, 32))
	s.waitForFold(t, 3*time.Minute)
	ctx := t.Context()

	opts := s.opts
	opts.Dir = goViews()
	editFile(t, filepath.Join(opts.Dir, "functions", "validate.yaml"), "  maxRetries: 3\n", "  maxRetries: 3\n  reviewedBy: data-quality\n")
	plan, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.CodeChanges) != 1 || len(plan.CodeChanges[0].Views) != 2 || plan.CodeChanges[0].What[0] != "config" {
		t.Fatalf("code changes %+v, want validate's config under both views", plan.CodeChanges)
	}
	var backfilled []string
	engines := map[string]string{}
	run := func(ctx context.Context, opts deploy.Options, view string, sharedLater bool) error {
		backfilled = append(backfilled, view)
		// As foldline deploy --backfill chooses, but fused where it may
		// (auto would pick deployed on a ledger this short).
		engine := backfill.EngineForDeploy(sharedLater)
		if engine == backfill.EngineAuto {
			engine = backfill.EngineFused
		}
		engines[view] = engine
		bopts := backfill.Options{Options: opts, View: view, Engine: engine, Poll: 500 * time.Millisecond, Timeout: 5 * time.Minute}
		bopts.Grace, bopts.GraceSet = 0, true
		_, err := backfill.Run(ctx, bopts, false)
		return err
	}
	if _, err := deploy.DeployWithBackfills(ctx, opts, run); err != nil {
		t.Fatalf("deploy --backfill: %v", err)
	}
	if !slices.Equal(backfilled, []string{"product_sales", "user_activity"}) {
		t.Errorf("backfilled %v, want product_sales, then user_activity", backfilled)
	}
	// product_sales's copy of validate is shared later: its output topic
	// must hold the whole ledger's outputs, which only the deployed engine
	// leaves.
	if want := map[string]string{"product_sales": backfill.EngineDeployed, "user_activity": backfill.EngineFused}; !maps.Equal(engines, want) {
		t.Errorf("engines %v, want %v", engines, want)
	}
	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	rec, err := store.ByTable(ctx, "user_activity", "user_activity_v2")
	if err != nil || rec == nil {
		t.Fatalf("the record of user_activity_v2: %v, %v", rec, err)
	}
	shared := stageNames(rec.Shares)
	slices.Sort(shared)
	if !slices.Equal(shared, []string{"dedup", "validate-bf-product_sales_v2"}) || rec.Stages[0].Name != "user-activity-bf-user_activity_v2" {
		t.Errorf("user_activity_v2 shares %v and copies %+v; want dedup and validate-bf-product_sales_v2 shared, user-activity copied", shared, rec.Stages)
	}
	functions, err := mustClients(t, s.svc).Functions.GetFunctionsWithContext(ctx, s.tenant, pipelineNS)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(functions)
	want := []string{"dedup", "product-sales-bf-product_sales_v2", "product_sales_v2-sink", "purchases-bf-product_sales_v2", "user-activity-bf-user_activity_v2", "user_activity_v2-sink", "validate-bf-product_sales_v2"}
	if !slices.Equal(functions, want) {
		t.Errorf("functions %v, want %v", functions, want)
	}
	again, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Pending()) != 0 || len(again.CodeChanges) != 0 {
		t.Errorf("plan after deploy --backfill: pending %+v, code changes %+v", again.Pending(), again.CodeChanges)
	}
	s.ingest(t, generate(t, 500, 33))
	s.waitForFold(t, 3*time.Minute)
}
