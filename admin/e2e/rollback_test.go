package e2e

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/views"
)

// TestRollbackWithinTheGraceIsUpToDate switches user_activity to a
// backfilled user_activity_v2, ingests more events, and rolls back to
// user_activity_v1 within its rollback grace: the old path kept following
// the ledger, so the rolled-back table equals the fold of the whole ledger,
// the events after the switch included. Rolled forward again with a grace
// of a second for v1, foldline views gc then retires what only v1 needs
// (its sink: the copy, unchanged code, shares validate and user-activity),
// its history says where it stopped, and activating it again is refused as stale, naming
// foldline backfill.
func TestRollbackWithinTheGraceIsUpToDate(t *testing.T) {
	s := deployShop(t, "rollback")
	events := generate(t, 5000, 24)
	s.ingest(t, events[:3000])
	s.waitForFold(t, 3*time.Minute)
	ctx := t.Context()

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	res, err := backfill.Run(ctx, opts, false)
	if err != nil {
		t.Fatalf("backfilling user_activity: %v", err)
	}
	if res.Table != "user_activity_v2" || len(res.Retired) != 0 {
		t.Fatalf("switched to %s retiring %q; want user_activity_v2, nothing retired during the grace", res.Table, res.Retired)
	}
	clients := mustClients(t, s.svc)
	exists := func(name string) bool {
		_, err := clients.Functions.GetFunctionWithContext(ctx, s.tenant, pipelineNS, name)
		if err != nil && !pulsarx.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !exists("user-activity") || !exists("user_activity_v1-sink") {
		t.Fatal("the old path was retired at the switch; it should follow the ledger during the rollback grace")
	}

	s.ingest(t, events[3000:4000]) // after the switch
	view, previous, err := views.Activate(ctx, views.Options{Command: s.opts.Command, Activate: "user_activity_v1"})
	if err != nil || view != "user_activity" || previous != "user_activity_v2" {
		t.Fatalf("rolling back to user_activity_v1: %s, %s, %v", view, previous, err)
	}
	// The active tables (v1 now) equal the fold of every event ingested.
	s.waitForFold(t, 2*time.Minute)
	s.ingest(t, events[4000:])
	s.waitForFold(t, 2*time.Minute)

	// Forward again, v1 kept up for a second only.
	forward := views.Options{Command: s.opts.Command, Activate: "user_activity_v2", Grace: time.Second, GraceSet: true}
	if _, _, err := views.Activate(ctx, forward); err != nil {
		t.Fatalf("activating user_activity_v2 again: %v", err)
	}
	var retired []deploy.Retired
	deadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(retired, func(r deploy.Retired) bool { return r.Table == "user_activity_v1" }) {
		if time.Now().After(deadline) {
			t.Fatalf("foldline views gc did not retire user_activity_v1 within a minute: %+v", retired)
		}
		time.Sleep(200 * time.Millisecond)
		if retired, err = deploy.RetireExpiredPaths(ctx, s.opts, time.Now()); err != nil {
			t.Fatalf("views gc: %v", err)
		}
	}
	if exists("user_activity_v1-sink") || !exists("user-activity") || !exists("validate") {
		t.Errorf("after gc: user_activity_v1-sink %v, user-activity %v, validate %v; want the first gone, the others kept (v2's copy shares them)",
			exists("user_activity_v1-sink"), exists("user-activity"), exists("validate"))
	}
	history, err := registry.History(ctx, s.session, s.keyspace, "user_activity")
	if err != nil {
		t.Fatal(err)
	}
	if following, known := registry.Following(history["user_activity_v1"]); following || !known {
		t.Errorf("history of user_activity_v1 %+v: want it stopped", history["user_activity_v1"])
	}
	if following, _ := registry.Following(history["user_activity_v2"]); !following {
		t.Errorf("history of user_activity_v2 %+v: want it following", history["user_activity_v2"])
	}
	_, _, err = views.Activate(ctx, views.Options{Command: s.opts.Command, Activate: "user_activity_v1"})
	if !errors.Is(err, views.ErrStale) || !strings.Contains(err.Error(), "foldline backfill user_activity") {
		t.Fatalf("activating the stopped user_activity_v1: %v, want ErrStale naming foldline backfill user_activity", err)
	}
	t.Logf("refused as it should be: %v", err)
	if table, _ := s.activeTable("user_activity"); table != "user_activity_v2" {
		t.Errorf("the view reads %s after the refusal, want user_activity_v2", table)
	}
}
