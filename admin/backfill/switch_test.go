package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// errInjected is the failure failingStore injects.
var errInjected = errors.New("injected failure of the record write")

// failingStore is the real record store with one write made to fail: the
// first Put of a record in state, before writing it or, with writeFirst,
// after (a CLI that dies right after the write).
type failingStore struct {
	recordStore
	state      string
	writeFirst bool
	failed     bool
}

func (s *failingStore) Put(ctx context.Context, r *backfillrecord.Record) error {
	if r.State != s.state || s.failed {
		return s.recordStore.Put(ctx, r)
	}
	s.failed = true
	if s.writeFirst {
		if err := s.recordStore.Put(ctx, r); err != nil {
			return err
		}
	}
	return errInjected
}

func (s *failingStore) Transition(ctx context.Context, r *backfillrecord.Record, from string) (bool, string, error) {
	if r.State != s.state || s.failed {
		return s.recordStore.Transition(ctx, r, from)
	}
	s.failed = true
	if s.writeFirst {
		if _, _, err := s.recordStore.Transition(ctx, r, from); err != nil {
			return false, "", err
		}
	}
	return false, "", errInjected
}

// switchEnv is a backfill of user_activity from user_activity_v1 (active,
// as deploy registers it) into user_activity_v2, started against the real
// Pulsar and Cassandra in a tenant and keyspace of its own. Its stages are
// not deployed (only the new table is created): the state machine of the
// record and the registry is what is under test.
func switchEnv(t *testing.T) (*env, Options) {
	t.Helper()
	svc := testenv.All(t)
	tenant := fmt.Sprintf("flsw-%d", rand.Uint64()%1_000_000_000)
	opts := Options{
		Options: deploy.Options{Command: target.Command{
			Dir: testenv.ShopManifestsDir(), Target: target.Flags{Tenant: tenant},
			Services: svc, Out: testenv.LogWriter{T: t}, ErrOut: testenv.LogWriter{T: t},
		}},
		View: "user_activity", Poll: 100 * time.Millisecond, Timeout: 20 * time.Second,
	}
	opts.defaults()
	ctx := t.Context()
	set, err := opts.Target.Load(opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	admin := clients.Admin
	if err := admin.Tenants().CreateWithContext(ctx, utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatalf("creating tenant %s: %v", tenant, err)
	}
	for _, ns := range set.Tenant.Namespaces {
		if err := admin.Namespaces().CreateNamespaceWithContext(ctx, tenant+"/"+ns.Name); err != nil {
			t.Fatalf("creating namespace %s/%s: %v", tenant, ns.Name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts.Options, Purge: true, Yes: true}); err != nil {
			t.Logf("purging tenant %s: %v", tenant, err)
		}
	})
	e, err := open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	replication := cassandra.Replication(e.set.Tenant.Replication)
	e.createStages = func(ctx context.Context, _ Options, stages []*manifest.Stage) error {
		return cassandra.EnsureSchema(ctx, e.cql, stages[len(stages)-1].View.Schema(), replication)
	}
	ks, live := e.set.Tenant.Keyspace, e.view.Schema()
	if err := cassandra.EnsureSchema(ctx, e.cql, live, replication); err != nil {
		t.Fatal(err)
	}
	if err := registry.Ensure(ctx, e.cql, ks); err != nil {
		t.Fatal(err)
	}
	definition, err := json.Marshal(live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Register(ctx, e.cql, ks, e.view.Name, live.Table, string(definition)); err != nil {
		t.Fatal(err)
	}
	return e, opts
}

// start starts the backfill (after whatever the test prepared).
func start(t *testing.T, e *env, opts Options) *backfillrecord.Record {
	t.Helper()
	rec, err := e.start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting the backfill: %v", err)
	}
	if rec.OldTable != "user_activity_v1" || rec.Table != "user_activity_v2" {
		t.Fatalf("backfill from %s into %s, want user_activity_v1 into user_activity_v2", rec.OldTable, rec.Table)
	}
	return rec
}

// state reads the view's active table, whether that table exists, and the
// state of the record of the backfill into user_activity_v2.
func state(t *testing.T, e *env) (active string, exists bool, record string) {
	t.Helper()
	ctx, ks := t.Context(), e.set.Tenant.Keyspace
	entry, err := registry.Get(ctx, e.cql, ks, e.view.Name)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.cql.Query(`SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, ks, entry.ActiveTable).
		WithContext(ctx).Scan(&n); err != nil {
		t.Fatal(err)
	}
	rec, err := e.store.ByTable(ctx, e.view.Name, "user_activity_v2")
	if err != nil || rec == nil {
		t.Fatalf("reading the record of user_activity_v2: %v, %v", rec, err)
	}
	return entry.ActiveTable, n == 1, rec.State
}

// TestFinishFailsBetweenSteps makes the record write fail at each step of
// the switch, then runs --abort or --watch as a user would, against the
// real registry and record: the table the registry points at survives every
// abort, and a watch completes the switch.
func TestFinishFailsBetweenSteps(t *testing.T) {
	cases := []struct {
		name string
		// failing is the record write that fails: of the state the
		// record is written in, before writing or after.
		failing    string
		writeFirst bool
		// wantActive and wantRecord are the view's active table and the
		// record's state after the failure.
		wantActive, wantRecord string
		// then is what the user runs next: "abort" or "watch".
		then     string
		wantErr  error
		endTable string
		endState string
	}{
		{name: "the switch is not recorded, abort", failing: StateSwitching,
			wantActive: "user_activity_v1", wantRecord: StateRunning,
			then: "abort", endTable: "user_activity_v1", endState: StateAborted},
		{name: "crash after recording the switch, abort", failing: StateSwitching, writeFirst: true,
			wantActive: "user_activity_v1", wantRecord: StateSwitching,
			then: "abort", endTable: "user_activity_v1", endState: StateAborted},
		{name: "crash after recording the switch, watch", failing: StateSwitching, writeFirst: true,
			wantActive: "user_activity_v1", wantRecord: StateSwitching,
			then: "watch", endTable: "user_activity_v2", endState: StateSwitched},
		{name: "the registry switched, its record failed, abort", failing: StateSwitched,
			wantActive: "user_activity_v2", wantRecord: StateSwitching,
			then: "abort", wantErr: registry.ErrActiveTable, endTable: "user_activity_v2", endState: StateSwitching},
		{name: "the registry switched, its record failed, watch", failing: StateSwitched,
			wantActive: "user_activity_v2", wantRecord: StateSwitching,
			then: "watch", endTable: "user_activity_v2", endState: StateSwitched},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, opts := switchEnv(t)
			rec := start(t, e, opts)
			real := e.store
			e.store = &failingStore{recordStore: real, state: c.failing, writeFirst: c.writeFirst}
			if _, err := e.finish(t.Context(), opts, rec); !errors.Is(err, errInjected) {
				t.Fatalf("finish with the write of %s failing: %v, want the injected failure", c.failing, err)
			}
			e.store = real
			if active, _, record := state(t, e); active != c.wantActive || record != c.wantRecord {
				t.Errorf("after the failure: the view reads %s, record %s; want %s, record %s", active, record, c.wantActive, c.wantRecord)
			}
			// What the user runs next reads everything afresh.
			var err error
			switch c.then {
			case "abort":
				_, err = e.abort(t.Context(), opts)
			case "watch":
				var unfinished *backfillrecord.Record
				if unfinished, err = e.store.Unfinished(t.Context(), e.view.Name); err != nil || unfinished == nil {
					t.Fatalf("the backfill to watch: %v, %v", unfinished, err)
				}
				_, err = e.watch(t.Context(), opts, unfinished)
			}
			if err != nil {
				t.Logf("%s: %v", c.then, err)
			}
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %v, want %v", c.then, err, c.wantErr)
			}
			active, exists, record := state(t, e)
			if active != c.endTable || !exists || record != c.endState {
				t.Errorf("after %s: the view reads %s (exists: %v), record %s; want %s (existing), record %s",
					c.then, active, exists, record, c.endTable, c.endState)
			}
		})
	}
}

// subscribeOldPath creates the topics the view's live path reads and its
// subscriptions (from the first entry), as deploy would, without deploying
// its functions: nothing consumes, so what the ledger gets stays in
// validate's backlog.
func subscribeOldPath(t *testing.T, e *env) {
	t.Helper()
	for _, st := range e.graph.PathTo(e.view.Name) {
		for _, in := range st.Inputs {
			tn, err := utils.GetTopicName(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.pulsar.Admin.Topics().CreateWithContext(t.Context(), *tn, 0); err != nil && !pulsarx.IsConflict(err) {
				t.Fatalf("creating topic %s: %v", in, err)
			}
			if err := e.pulsar.Admin.Subscriptions().CreateWithContext(t.Context(), *tn, st.SubName, utils.Earliest); err != nil {
				t.Fatalf("subscribing %s to %s: %v", st.SubName, in, err)
			}
		}
	}
}

// TestRequireIdenticalWaitsForTheOldPath checks that --require-identical
// compares the tables only once the old path, which fills the active table,
// has got as far through the ledger as the new one: an old path with a
// backlog, or one whose progress cannot be read, is refused with
// ErrOldNotCaughtUp and the view is not switched; once it has caught up the
// comparison runs and the view switches.
func TestRequireIdenticalWaitsForTheOldPath(t *testing.T) {
	e, opts := switchEnv(t)
	subscribeOldPath(t, e)
	ledger := e.set.Tenant.Ledger[0].Name
	testenv.Publish(t, opts.Services, ledger, 5)
	rec := start(t, e, opts)
	if rec.LedgerAtStart[ledger] != 5 {
		t.Fatalf("ledger at the start %v, want 5 entries of %s", rec.LedgerAtStart, ledger)
	}
	e.catchUpWait = time.Second
	opts.RequireIdentical = true
	validate, sink := e.graph.PathTo(e.view.Name)[0], e.graph.PathTo(e.view.Name)[2]
	tn := func(topic string) utils.TopicName {
		name, err := utils.GetTopicName(topic)
		if err != nil {
			t.Fatal(err)
		}
		return *name
	}
	refused := func(t *testing.T) {
		t.Helper()
		_, err := e.finish(t.Context(), opts, rec)
		t.Logf("finish: %v", err)
		if !errors.Is(err, ErrOldNotCaughtUp) {
			t.Fatalf("finish: %v, want ErrOldNotCaughtUp", err)
		}
		if active, _, record := state(t, e); active != "user_activity_v1" || record != StateRunning || rec.Diff != nil {
			t.Fatalf("after the refusal: the view reads %s, record %s, diff %v; want user_activity_v1, running, no diff", active, record, rec.Diff)
		}
	}

	t.Run("the old path has a backlog", refused)

	ctx := t.Context()
	if err := e.pulsar.Admin.Subscriptions().ClearBacklogWithContext(ctx, tn(ledger), validate.SubName); err != nil {
		t.Fatal(err)
	}
	if err := e.pulsar.Admin.Subscriptions().DeleteWithContext(ctx, tn(sink.Inputs[0]), sink.SubName); err != nil {
		t.Fatal(err)
	}
	t.Run("a subscription of the old path is missing", refused)

	if err := e.pulsar.Admin.Subscriptions().CreateWithContext(ctx, tn(sink.Inputs[0]), sink.SubName, utils.Earliest); err != nil {
		t.Fatal(err)
	}
	t.Run("the old path has caught up", func(t *testing.T) {
		res, err := e.finish(ctx, opts, rec)
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		if res.State != StateSwitched || res.Diff == nil || !res.Diff.Identical() || res.SwitchedAt.IsZero() {
			t.Fatalf("result %+v (diff %v), want switched, with its time, after an identical comparison", res, res.Diff)
		}
		if active, _, _ := state(t, e); active != "user_activity_v2" {
			t.Fatalf("the view reads %s, want user_activity_v2", active)
		}
	})
}

// TestAbortRacingASwitchNeverLeavesTheViewWithoutWriters runs --abort and
// the switch of a --watch at once, against the real registry: whichever
// wins, the view never reads a table whose functions the abort removed.
// First with the switch attempted while the abort removes the functions
// (before the registry's compare-and-set, the switch won there and the
// abort's drop was refused after the functions were gone); then both
// started at the same instant, a few times.
func TestAbortRacingASwitchNeverLeavesTheViewWithoutWriters(t *testing.T) {
	type outcome struct {
		active, record  string
		removed         bool
		abortErr, swErr error
	}
	race := func(t *testing.T, duringRemoval bool) outcome {
		e, opts := switchEnv(t)
		rec := start(t, e, opts)
		ctx := t.Context()
		var (
			removed  atomic.Bool
			switched = make(chan error, 1)
		)
		finish := func() {
			_, err := e.finish(ctx, opts, rec)
			switched <- err
		}
		e.deleteStages = func(context.Context, []*manifest.Stage, io.Writer) ([]string, error) {
			removed.Store(true)
			if duringRemoval {
				go finish()
				select {
				case err := <-switched:
					switched <- err
				case <-time.After(time.Minute):
					t.Error("the switch did not end within a minute")
				}
			}
			return nil, nil
		}
		var out outcome
		if duringRemoval {
			_, out.abortErr = e.abort(ctx, opts)
		} else {
			aborted := make(chan error, 1)
			go func() { _, err := e.abort(ctx, opts); aborted <- err }()
			go finish()
			out.abortErr = <-aborted
		}
		out.swErr = <-switched
		out.active, _, out.record = state(t, e)
		out.removed = removed.Load()
		t.Logf("abort: %v; switch: %v; the view reads %s, record %s, functions removed: %v", out.abortErr, out.swErr, out.active, out.record, out.removed)
		if out.active == "user_activity_v2" && out.removed {
			t.Fatalf("the view reads user_activity_v2, whose functions the abort removed")
		}
		switch out.active {
		case "user_activity_v2":
			if !errors.Is(out.abortErr, registry.ErrActiveTable) || out.swErr != nil || out.record != StateSwitched {
				t.Errorf("the switch won: want the abort refused with ErrActiveTable and the record switched")
			}
		case "user_activity_v1":
			if out.abortErr != nil || out.swErr == nil || out.record != StateAborted {
				t.Errorf("the abort won: want the switch refused and the record aborted")
			}
		default:
			t.Errorf("the view reads %q", out.active)
		}
		return out
	}
	t.Run("the switch tried while the abort removes the functions", func(t *testing.T) {
		if out := race(t, true); out.active != "user_activity_v1" || !errors.Is(out.swErr, registry.ErrAborting) {
			t.Errorf("the switch: %v, want ErrAborting, the view on user_activity_v1", out.swErr)
		}
	})
	for i := range 3 {
		t.Run(fmt.Sprintf("started together %d", i+1), func(t *testing.T) { race(t, false) })
	}
}
