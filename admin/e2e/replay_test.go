package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/trainingset"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/shopfold"
)

// TestReplayAsOfATime replays user_activity as of a time between two
// ingests: the snapshot table equals the fold of the first ingest only,
// although the second was in the ledger before the replay started and more
// events arrive while it runs; the view keeps reading its active table,
// which follows every event; the replay's functions are gone afterwards,
// the registry lists the table as a snapshot, deploy has nothing to
// change, and foldline views --drop removes the snapshot (not the active
// table).
func TestReplayAsOfATime(t *testing.T) {
	s := deployShop(t, "asof")
	events := generate(t, 7000, 43)
	first := time.Now()
	s.ingest(t, events[:3000])
	cut := time.Now()
	time.Sleep(50 * time.Millisecond) // later publish times, at millisecond precision
	s.ingest(t, events[3000:6000])
	s.waitForFold(t, 3*time.Minute)

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.Until = cut.Format(time.RFC3339Nano)
	rec, err := backfill.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting the replay as of %s: %v", opts.Until, err)
	}
	s.ingest(t, events[6000:]) // live traffic during the replay
	var progress bytes.Buffer
	opts.JSON, opts.Out = true, &progress
	res, err := backfill.Run(t.Context(), opts, true)
	if err != nil {
		t.Fatalf("replaying user_activity as of %s: %v", opts.Until, err)
	}
	opts.JSON, opts.Out = false, s.opts.Out
	// The stage that reads the ledger stops at the cut: it moves past the
	// rest instead of reading and skipping all 7000 events.
	var final backfill.Snapshot
	for dec := json.NewDecoder(&progress); dec.More(); {
		var snap backfill.Snapshot
		if err := dec.Decode(&snap); err == nil && len(snap.Stages) > 0 {
			final = snap
		}
	}
	if len(final.Stages) == 0 || final.Stages[0].Processed >= 6000 {
		t.Errorf("the replay's first stage processed %+v of 7000 ledger events, want the 3000 before the cut and not all the rest", final.Stages)
	} else {
		t.Logf("the replay's %s processed %d of 7000 ledger events", final.Stages[0].Name, final.Stages[0].Processed)
	}
	if res.State != backfill.StateSnapshot || res.Table != rec.Table || res.OldTable != "user_activity_v1" || res.Until == "" {
		t.Fatalf("result %+v, want a snapshot in %s beside user_activity_v1", res, rec.Table)
	}

	got, err := s.userActivity(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	want := foldAtCassandraPrecision(events[:3000])
	var problems []string
	diffRows("user_activity as of the cut", got, want.UserActivity, func(format string, args ...any) {
		if len(problems) < 8 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	})
	if len(problems) > 0 {
		t.Fatalf("the snapshot differs from the fold of the first 3000 events:\n%s", strings.Join(problems, "\n"))
	}
	if all := foldAtCassandraPrecision(events); maps.Equal(all.UserActivity, want.UserActivity) {
		t.Fatal("the fold of all events equals that of the first 3000: the test would not see a missing cutoff")
	}

	if active, err := s.activeTable("user_activity"); err != nil || active != "user_activity_v1" {
		t.Fatalf("active table %q (%v), want user_activity_v1 still", active, err)
	}
	s.waitForFold(t, 2*time.Minute) // the live view has every event

	// A training set with labels before, between and after the ingests
	// equals point lookups on the replay as of the cut and on the live
	// table, from one pass over the ledger.
	snapshot, err := s.userActivity(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.userActivity("user_activity_v1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	users := slices.Sorted(maps.Keys(live))
	var before, atCut, atNow []label
	for _, u := range users {
		before = append(before, label{user: u, at: first.Add(-time.Second)})
		atCut = append(atCut, label{user: u, at: cut})
		atNow = append(atNow, label{user: u, at: now})
	}
	rows, tres := s.trainingSet(t, slices.Concat(before, atCut, atNow), trainingset.TimePublish, "asof.parquet", "")
	checkAsOf(t, "before any event", rows, before, shopfold.Result{})
	checkAsOf(t, "as of the replay's cut", rows, atCut, shopfold.Result{UserActivity: snapshot})
	checkAsOf(t, "now", rows, atNow, shopfold.Result{UserActivity: live})
	t.Logf("training set of %d labels from %d ledger events in %.1f s", tres.Written, tres.Events, tres.Seconds)

	list, err := views.List(t.Context(), views.Options{Command: s.opts.Command})
	if err != nil {
		t.Fatalf("listing views: %v", err)
	}
	i := slices.IndexFunc(list, func(v views.View) bool { return v.View == "user_activity" })
	if i < 0 || !slices.Contains(list[i].Versions, views.Version{Table: res.Table, State: registry.StateSnapshot}) {
		t.Fatalf("views %+v, want %s listed as a snapshot", list, res.Table)
	}
	plan, err := deploy.MakePlan(t.Context(), s.opts)
	if err != nil {
		t.Fatalf("planning after the replay: %v", err)
	}
	if pending := plan.Pending(); len(pending) > 0 {
		t.Errorf("deploy after the replay would change %+v", pending)
	}
	functions, err := s.pulsarAdmin(t).Functions().GetFunctions(s.tenant, pipelineNS)
	if err != nil {
		t.Fatalf("listing functions: %v", err)
	}
	for _, name := range functions {
		if strings.Contains(name, res.Table) {
			t.Errorf("function %s of the replay still deployed", name)
		}
	}

	// The last ledger position the snapshot applied: a replay as of that
	// position must give the same table (every valid event touches
	// user_activity).
	last := s.lastApplied(t, res.Table)

	vopts := views.Options{Command: s.opts.Command, Drop: "user_activity_v1"}
	if _, err := views.Drop(t.Context(), vopts); !errors.Is(err, views.ErrInUse) {
		t.Errorf("dropping the active table: err %v, want ErrInUse", err)
	}
	vopts.Drop = res.Table
	if view, err := views.Drop(t.Context(), vopts); err != nil || view != "user_activity" {
		t.Fatalf("dropping the snapshot %s: view %q, err %v", res.Table, view, err)
	}
	if _, err := s.userActivity(res.Table); err == nil {
		t.Errorf("table %s still answers after its drop", res.Table)
	}
	if _, err := views.Drop(t.Context(), vopts); err == nil {
		t.Errorf("dropping %s twice: no error", res.Table)
	}

	// The same table version again (its functions' names too: the worker's
	// stored packages of the first replay must be gone), as of a position.
	opts.Until = last.String()
	res, err = backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("replaying user_activity as of position %s: %v", opts.Until, err)
	}
	if got, err = s.userActivity(res.Table); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want.UserActivity) {
		t.Fatalf("the snapshot as of position %s differs from the fold of the first 3000 events", opts.Until)
	}
}

// lastApplied returns the latest ledger position applied to any row of a
// user_activity table.
func (s *shop) lastApplied(t *testing.T, table string) envelope.Position {
	t.Helper()
	iter := s.session.Query(`SELECT fl_applied FROM ` + s.keyspace + `.` + table).Iter()
	var (
		applied map[string]string
		last    envelope.Position
	)
	for iter.Scan(&applied) {
		for _, pos := range applied {
			p, err := envelope.ParsePosition(pos)
			if err != nil {
				t.Fatalf("reading fl_applied of %s: %v", table, err)
			}
			if p.Compare(last) > 0 {
				last = p
			}
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("reading fl_applied of %s: %v", table, err)
	}
	return last
}
