package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/internal/testenv"
)

// backfillOptions are the options of a backfill of view on s, from the
// manifests in dir.
func (s *shop) backfillOptions(view, dir string) backfill.Options {
	opts := backfill.Options{Options: s.opts, View: view, Poll: 500 * time.Millisecond, Timeout: 4 * time.Minute}
	opts.Dir = dir
	return opts
}

// manifestsWithout copies the shop manifests (testenv.ShopManifestsDir) into
// a temporary directory without the product_sales view and the two functions only it needs.
func manifestsWithout(t *testing.T) string {
	t.Helper()
	src := testenv.ShopManifestsDir()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		switch rel {
		case "views/product_sales.yaml", "functions/purchases.yaml", "functions/product-sales.yaml":
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == "pipeline.yaml" {
			drop := regexp.MustCompile(`(?m)^  - config: functions/(purchases|product-sales)\.yaml\n    binary: .*\n`)
			data = drop.ReplaceAll(data, nil)
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying the manifests: %v", err)
	}
	return dst
}

// killOnce sends SIGKILL to the running instances of a function (which the
// worker restarts), reporting whether there was one.
func (s *shop) killOnce(t *testing.T, name string) bool {
	t.Helper()
	pids := testenv.InstancePIDs(t, s.tenant, pipelineNS, name)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing %s (pid %d): %v", name, pid, err)
		}
	}
	return len(pids) > 0
}

// TestBackfillNewView adds product_sales to a pipeline whose ledger already
// holds events: the backfill shares the live validate (its output is kept
// from the first event) and runs purchases, product-sales and the sink from
// the first event into product_sales_v1, with more events
// arriving and its instances killed meanwhile, and the view ends equal to
// the fold of the whole ledger. A second backfill of the view is refused
// while this one runs, and status shows it.
func TestBackfillNewView(t *testing.T) {
	s := deployShopFrom(t, "bfnew", manifestsWithout(t))
	events := generate(t, 8000, 21)
	s.ingest(t, events[:6000])

	full := testenv.ShopManifestsDir()
	opts := s.backfillOptions("product_sales", full)
	rec, err := backfill.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting the backfill: %v", err)
	}
	if rec.Table != "product_sales_v1" || rec.OldTable != "" {
		t.Fatalf("backfill fills %s replacing %q, want product_sales_v1 replacing nothing", rec.Table, rec.OldTable)
	}
	if _, err := backfill.Start(t.Context(), opts); !errors.Is(err, backfill.ErrAlreadyRunning) {
		t.Fatalf("second backfill of product_sales: got %v, want ErrAlreadyRunning", err)
	}
	vopts := views.Options{Command: target.Command{Dir: full, Target: s.opts.Target, Services: s.svc}, Activate: rec.Table}
	if _, _, err := views.Activate(t.Context(), vopts); !errors.Is(err, views.ErrInUse) {
		t.Fatalf("activating %s while it is building: got %v, want ErrInUse", rec.Table, err)
	}
	report, err := status.Get(t.Context(), status.Options{Command: target.Command{Dir: full, Target: s.opts.Target, Services: s.svc}})
	if err != nil {
		t.Fatalf("reading status: %v", err)
	}
	if len(report.Backfills) != 1 || report.Backfills[0].View != "product_sales" || len(report.Backfills[0].Stages) != 5 {
		t.Fatalf("status shows backfills %+v, want product_sales's with 5 stages (dedup the first)", report.Backfills)
	}

	// Live traffic and a crash of the backfill's first stage midway (its
	// copy shares the live dedup and validate, which user_activity's table
	// was built with: purchases is its first stage).
	s.ingest(t, events[6000:])
	if len(rec.Shares) != 2 || rec.Shares[0].Name != "dedup" || rec.Shares[1].Name != "validate" {
		t.Fatalf("the backfill shares %+v, want dedup and validate", rec.Shares)
	}
	first := "purchases" + "-bf-product_sales_v1"
	testenv.WaitFor(t, time.Minute, first+" running", func() bool { return s.killOnce(t, first) })
	sink := "product_sales_v1-sink"
	testenv.WaitFor(t, time.Minute, sink+" running", func() bool { return s.killOnce(t, sink) })

	res, err := backfill.Run(t.Context(), opts, true)
	if err != nil {
		t.Fatalf("watching the backfill: %v", err)
	}
	if res.State != backfill.StateSwitched || res.Table != "product_sales_v1" || res.Diff != nil {
		t.Fatalf("backfill result %+v, want switched to product_sales_v1 without a comparison", res)
	}
	s.waitForFold(t, 2*time.Minute)

	// Deploying the full manifests now must neither rewire the backfill's
	// sink (it has the name deploy gives it) nor add a second path.
	deployOpts := s.opts
	deployOpts.Dir = full
	plan, err := deploy.MakePlan(t.Context(), deployOpts)
	if err != nil {
		t.Fatalf("planning after the switch: %v", err)
	}
	if pending := plan.Pending(); len(pending) > 0 {
		t.Errorf("deploy after the backfill of a new view would change %+v", pending)
	}
}

// TestBackfillIdenticalReplay replays user_activity with its unchanged
// transformation and no rollback grace (--grace 0): the copy is the sink
// alone (validate and user-activity are shared), the new table equals the
// old one, the view switches to user_activity_v2, the old sink is retired
// at once while the shared stages stay, the new path carries live traffic, and --activate of the old
// table is refused as stale unless --stale.
func TestBackfillIdenticalReplay(t *testing.T) {
	s := deployShop(t, "bfsame")
	events := generate(t, 6000, 22)
	s.ingest(t, events[:5000])
	s.waitForFold(t, 3*time.Minute)

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.RequireIdentical = true
	opts.Grace, opts.GraceSet = 0, true
	res, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("backfilling user_activity: %v", err)
	}
	if res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
		t.Fatalf("diff %+v, want identical non-empty tables", res.Diff)
	}
	if res.Table != "user_activity_v2" || res.OldTable != "user_activity_v1" {
		t.Fatalf("switched %s → %s, want user_activity_v1 → user_activity_v2", res.OldTable, res.Table)
	}
	// Nothing changed: the copy is the sink alone, reading user-activity's
	// output from the first event; only the old sink retires.
	retired := strings.Join(res.Retired, "\n")
	for _, want := range []string{"function " + s.tenant + "/pipeline/user_activity_v1-sink"} {
		if !strings.Contains(retired, want+"\n") && !strings.HasSuffix(retired, want) {
			t.Errorf("retired %q, want %s among them", res.Retired, want)
		}
	}
	for _, shared := range []string{"/validate", "/user-activity"} {
		if strings.Contains(retired, shared+"\n") || strings.HasSuffix(retired, shared) {
			t.Errorf("retired the shared stage %s: %q", shared, res.Retired)
		}
	}
	list, err := views.List(t.Context(), views.Options{Command: s.opts.Command})
	if err != nil {
		t.Fatalf("listing views: %v", err)
	}
	i := slices.IndexFunc(list, func(v views.View) bool { return v.View == "user_activity" })
	if i < 0 || list[i].Table != "user_activity_v2" ||
		!slices.Contains(list[i].Versions, views.Version{Table: "user_activity_v1", State: registry.StateRetired}) {
		t.Fatalf("views %+v, want user_activity active on v2 with v1 retired", list)
	}

	// deploy must not bring the retired stages back.
	plan, err := deploy.MakePlan(t.Context(), s.opts)
	if err != nil {
		t.Fatalf("planning after the switch: %v", err)
	}
	if pending := plan.Pending(); len(pending) > 0 {
		t.Errorf("deploy after the switch would change %+v", pending)
	}
	if !slices.ContainsFunc(plan.Changes, func(c deploy.Change) bool {
		return c.Action == deploy.Note && c.Name == s.tenant+"/pipeline/user_activity_v1-sink" && strings.Contains(strings.Join(c.Details, " "), "run there as "+s.tenant+"/pipeline/user_activity_v2-sink")
	}) {
		t.Errorf("plan %+v does not note the retired user_activity_v1-sink and the copy that runs it", plan.Changes)
	}

	s.ingest(t, events[5000:])
	s.waitForFold(t, 2*time.Minute)

	rollback := views.Options{Command: s.opts.Command, Activate: "user_activity_v1"}
	if _, _, err := views.Activate(t.Context(), rollback); !errors.Is(err, views.ErrStale) || !strings.Contains(err.Error(), "foldline backfill user_activity") {
		t.Fatalf("activating the retired user_activity_v1: %v, want ErrStale naming foldline backfill user_activity", err)
	}
	rollback.Stale = true
	view, previous, err := views.Activate(t.Context(), rollback)
	if err != nil || view != "user_activity" || previous != "user_activity_v2" {
		t.Fatalf("activating user_activity_v1: view %s, previous %s, err %v", view, previous, err)
	}
	if table, err := s.activeTable("user_activity"); err != nil || table != "user_activity_v1" {
		t.Fatalf("active table after rollback %s (%v), want user_activity_v1", table, err)
	}

	// A backfill started and aborted leaves nothing behind.
	rec, err := backfill.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting another backfill: %v", err)
	}
	if rec.Table != "user_activity_v3" {
		t.Fatalf("the next backfill fills %s, want user_activity_v3", rec.Table)
	}
	if _, err := backfill.Abort(t.Context(), opts); err != nil {
		t.Fatalf("aborting: %v", err)
	}
	for _, ref := range rec.Stages {
		if pids := testenv.InstancePIDs(t, s.tenant, pipelineNS, ref.Name); len(pids) > 0 {
			testenv.WaitFor(t, time.Minute, ref.Name+" stopped", func() bool { return len(testenv.InstancePIDs(t, s.tenant, pipelineNS, ref.Name)) == 0 })
		}
	}
	list, err = views.List(t.Context(), views.Options{Command: s.opts.Command})
	if err != nil {
		t.Fatal(err)
	}
	i = slices.IndexFunc(list, func(v views.View) bool { return v.View == "user_activity" })
	if slices.ContainsFunc(list[i].Versions, func(v views.Version) bool { return v.Table == "user_activity_v3" }) || list[i].Table != "user_activity_v1" {
		t.Fatalf("after the abort: %+v, want v3 gone and v1 active", list[i])
	}
	var tables int
	if err := s.session.Query(`SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, s.keyspace, "user_activity_v3").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("table user_activity_v3 after the abort: %d (%v), want dropped", tables, err)
	}
	if _, err := backfill.Abort(t.Context(), opts); !errors.Is(err, backfill.ErrNoBackfill) {
		t.Fatalf("aborting again: got %v, want ErrNoBackfill", err)
	}
}

// manifestsWithBinary copies the shop manifests into a temporary directory
// with function file's binary replaced by binary.
func manifestsWithBinary(t *testing.T, function, binary string) string {
	t.Helper()
	dst := testenv.ShopManifests(t)
	pipeline := filepath.Join(dst, "pipeline.yaml")
	data, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)(^  - config: functions/` + regexp.QuoteMeta(function) + `\.yaml\n    binary: ).*$`)
	edited := line.ReplaceAll(data, []byte("${1}"+binary))
	if string(edited) == string(data) {
		t.Fatalf("pipeline.yaml has no function %s to change", function)
	}
	if err := os.WriteFile(pipeline, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestBackfillChangedTransformationWithLiveTraffic backfills product_sales
// with a changed product-sales stage (functions/examples/testdata/ordersbyunits) while events
// keep arriving and the old table keeps answering reads: --require-identical
// refuses the switch (the tables differ, as they must), the backfill keeps
// running, a later --watch switches it, and the new table equals the fold of
// the whole ledger under the changed rule.
func TestBackfillChangedTransformationWithLiveTraffic(t *testing.T) {
	s := deployShop(t, "bfchg")
	events := generate(t, 7000, 23)
	s.ingest(t, events[:4000])
	s.waitForFold(t, 3*time.Minute)

	dir := manifestsWithBinary(t, "product-sales", "github.com/foldline/foldline/functions/examples/testdata/ordersbyunits")
	opts := s.backfillOptions("product_sales", dir)
	if _, err := backfill.Start(t.Context(), opts); err != nil {
		t.Fatalf("starting the backfill: %v", err)
	}
	strict := opts
	strict.RequireIdentical = true
	type outcome struct {
		res *backfill.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := backfill.Run(t.Context(), strict, true)
		done <- outcome{res, err}
	}()
	reads := 0
	readOld := func() {
		var n int
		if err := s.session.Query(`SELECT COUNT(*) FROM ` + s.keyspace + `.product_sales_v1`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("reading the old table during the backfill: %d rows, %v", n, err)
		}
		reads++
	}
	for i := 4000; i < len(events); i += 1000 {
		s.ingest(t, events[i:i+1000])
		readOld()
	}
	var strictRun outcome
	for waiting := true; waiting; {
		select {
		case strictRun = <-done:
			waiting = false
		case <-time.After(500 * time.Millisecond):
			readOld()
		}
	}
	if !errors.Is(strictRun.err, backfill.ErrNotIdentical) {
		t.Fatalf("--require-identical with a changed transformation: got %v, want ErrNotIdentical", strictRun.err)
	}
	if table, _ := s.activeTable("product_sales"); table != "product_sales_v1" {
		t.Fatalf("a refused switch switched the view to %s", table)
	}
	t.Logf("the old table answered %d reads during the backfill", reads)

	res, err := backfill.Run(t.Context(), opts, true)
	if err != nil {
		t.Fatalf("watching the backfill again: %v", err)
	}
	if res.Table != "product_sales_v2" || res.Diff == nil || res.Diff.Differing == 0 {
		t.Fatalf("result %+v (diff %+v), want a switch to product_sales_v2 with differing rows", res, res.Diff)
	}
	want := s.expected()
	for sku, row := range want.ProductSales {
		row.Orders = row.Units // the changed rule
		want.ProductSales[sku] = row
	}
	s.waitForResult(t, want, 2*time.Minute)
	if _, err := backfill.Run(t.Context(), opts, true); !errors.Is(err, backfill.ErrNoBackfill) {
		t.Fatalf("--watch after the switch: got %v, want ErrNoBackfill", err)
	}
}

// TestBackfillsOfTheJoinAndTheWindows backfills views, each a copy of its
// whole path from the ledger, and checks that every view still equals the
// fold of the ledger, the windowed ones read with GetAt against the fold
// by event time (issue 43, item 5; issue 47, item 3). sku_refunds — the
// keyed-state join, whose copy of sku-refunds builds its own state from
// the ledger — with the deployed engine, then with the fused one, which
// folds the ledger on this machine and hands the states it built to the
// deployed copy: both identical to the table before, and the refunds that
// arrive afterwards of orders purchased before the hand-over count against
// their skus. Then the windowed views user_purchases_7d and sku_units_1d,
// once the ledger holds the last day's events (the generated stream's
// times run up to now: before, the 1-day windows are empty), and more
// events after the switches.
func TestBackfillsOfTheJoinAndTheWindows(t *testing.T) {
	s := deployShop(t, "bfjoin")
	if !s.windowed {
		t.Fatal("the shop's manifests declare no windowed views: nothing would be checked")
	}
	events := generate(t, 8000, 26)
	s.ingest(t, events[:6500])
	s.waitForFold(t, 3*time.Minute)

	backfillWhole := func(view string, engine string) {
		t.Helper()
		opts := s.backfillOptions(view, s.opts.Dir)
		opts.RequireIdentical = true
		opts.CopyAll = true // the whole path from the ledger, the stateful stages included
		opts.Engine = engine
		res, err := backfill.Run(t.Context(), opts, false)
		if err != nil {
			t.Fatalf("backfilling %s (%s engine): %v", view, engine, err)
		}
		// The comparison is row by row for sku_refunds; for a windowed
		// view it reads one tile per key, and waitForFold checks the
		// windows against the fold.
		if res.State != backfill.StateSwitched || res.Diff == nil || !res.Diff.Identical() || res.Diff.NewRows == 0 {
			t.Fatalf("backfill of %s (%s engine): %+v, diff %+v; want switched, identical, not empty", view, engine, res, res.Diff)
		}
		t.Logf("%s backfilled into %s (%s engine), identical to %s: %d rows", view, res.Table, engine, res.OldTable, res.Diff.NewRows)
		s.waitForFold(t, 2*time.Minute)
	}
	backfillWhole("sku_refunds", backfill.EngineDeployed)
	backfillWhole("sku_refunds", backfill.EngineFused)
	if table, err := s.activeTable("sku_refunds"); err != nil || table != "sku_refunds_v3" {
		t.Fatalf("sku_refunds reads %q (%v), want sku_refunds_v3", table, err)
	}
	if n := refundsOfOrdersBefore(events[:6500], events[6500:]); n == 0 {
		t.Fatal("no refund after the hand-over is of an order purchased before it: the handed-over states would not be checked")
	} else {
		t.Logf("%d refunds after the hand-over are of orders purchased before it", n)
	}
	s.ingest(t, events[6500:])
	s.waitForFold(t, 3*time.Minute)

	for _, view := range []string{"user_purchases_7d", "sku_units_1d"} {
		backfillWhole(view, backfill.EngineDeployed)
	}
	s.ingest(t, generate(t, 1500, 27))
	s.waitForFold(t, 3*time.Minute)
}

// refundsOfOrdersBefore counts the refunds in later of the orders that a
// purchase in earlier opened.
func refundsOfOrdersBefore(earlier, later [][]byte) int {
	type orderEvent struct{ Type, Order string }
	read := func(line []byte) orderEvent {
		var e orderEvent
		_ = json.Unmarshal(line, &e) // a malformed line is neither
		return e
	}
	purchased := map[string]bool{}
	for _, l := range earlier {
		if e := read(l); e.Type == "purchase" {
			purchased[e.Order] = true
		}
	}
	n := 0
	for _, l := range later {
		if e := read(l); e.Type == "refund" && purchased[e.Order] {
			n++
		}
	}
	return n
}
