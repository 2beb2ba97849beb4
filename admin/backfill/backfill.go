// Package backfill is `foldline backfill`: it runs a view's transformations
// over all history while the current version keeps serving, then switches
// the view to the result.
//
// Pulsar applies a subscription's initial position only when the
// subscription is created, and refuses a new subscription name on
// `functions update`, so a backfill is a copy of the view's path (every
// stage from the ledger to its sink, shared stages included) deployed under
// new function, subscription and topic names (manifest.ForkPath) with
// position Earliest, writing into a new table version registered as
// building. Its progress is read from the subscriptions' backlogs against
// the ledger's size at the start; its record (which functions, the ledger
// size, the state) lives in Cassandra next to the view registry, so the CLI
// may exit and `--watch` takes over later. Once every stage (and the old
// path) has caught up, the old and new tables are compared; the record
// becomes switching, then the registry switches the view's active table in
// one write, the old path's functions that no other view needs are deleted,
// and the record becomes switched (finish); the old table stays for
// rollback. Abort never drops the table the registry names active.
package backfill

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/admin/progress"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The states of a backfill (Record.State, Result.State).
const (
	StateRunning   = backfillrecord.StateRunning
	StateSwitching = backfillrecord.StateSwitching
	StateSwitched  = backfillrecord.StateSwitched
	StateAborted   = backfillrecord.StateAborted
	StateSnapshot  = backfillrecord.StateSnapshot
)

// Record is a backfill's record (see backfillrecord).
type Record = backfillrecord.Record

// Errors for decisions (the CLI maps them to exit codes and messages).
var (
	// ErrAlreadyRunning: the view has a backfill that has not finished.
	ErrAlreadyRunning = errors.New("already backfilling")
	// ErrNoBackfill: --watch or --abort of a view with no running backfill.
	ErrNoBackfill = errors.New("no running backfill")
	// ErrNotIdentical: --require-identical and the tables differ.
	ErrNotIdentical = errors.New("the new table differs from the old one")
	// ErrNotCaughtUp: the watch timed out before every stage caught up;
	// the backfill goes on.
	ErrNotCaughtUp = errors.New("not caught up yet")
	// ErrOldNotCaughtUp: the old path (the one filling the active table)
	// did not reach the point of the ledger the new one had, so the tables
	// cannot be compared; with --require-identical the backfill does not
	// switch and goes on.
	ErrOldNotCaughtUp = errors.New("the old version has not caught up")
)

// Options are backfill's settings. The embedded deploy options give the
// manifests, the target tenant, the services, the binary cache and how long
// to wait for the new functions' instances.
type Options struct {
	deploy.Options
	// View is the view to backfill.
	View string
	// Threshold is the backlog (entries) under which a stage counts as
	// caught up. Default 0.
	Threshold int64
	// RequireIdentical makes a difference between the old and the new
	// table fatal (a replay of an unchanged transformation).
	RequireIdentical bool
	// KeepOld is how long the old table is kept after the switch for a
	// rollback (foldline views --activate); a later backfill of the view
	// drops old tables past it. Default 7 days.
	KeepOld time.Duration
	// Grace is how long the old table's path keeps following the ledger
	// after the switch, so that a rollback finds it up to date; with
	// GraceSet false, the view manifest's rollbackGrace (default 24h).
	Grace    time.Duration
	GraceSet bool
	// Poll is the time between progress snapshots. Default 1s.
	Poll time.Duration
	// Timeout bounds how long to watch; 0 watches until caught up.
	Timeout time.Duration
	// JSON prints each snapshot and the result as JSON lines on Out.
	JSON bool
	// Until makes the backfill a replay as of a point of the ledger: an
	// RFC 3339 time (events published up to it) or a ledger position
	// ledger:entry[:batch] (events up to it, inclusive). The stages that
	// read the ledger skip what lies beyond; once every stage has caught up
	// the replay's functions and topics are removed and its table is kept
	// as a snapshot next to the active one, which is not switched.
	Until string
	// UntilClock is what an RFC 3339 Until cuts by: ClockPublish (default)
	// or ClockEvent.
	UntilClock string
	// Engine is how the copy catches up: EngineAuto (default),
	// EngineDeployed, EngineFused or EngineCluster.
	Engine string
	// Progress, when set, keeps the progress as Prometheus metrics
	// (--metrics-listen). Default nil: none.
	Progress *Progress
	// Checkpoint is how often a fused run writes its checkpoint and
	// heartbeat into the backfill's record, and saves the keys' states of
	// a path with a stateful function. Default 2s for the heartbeat, 10s
	// for the states (defaultExportEvery).
	Checkpoint time.Duration
	// CopyAll copies every stage of the view's path, the unchanged ones
	// upstream too, instead of sharing them (sharing).
	CopyAll bool
	// MaxRate bounds the ledger events per second a fused or cluster run
	// reads, so that a long backfill leaves the cluster's Pulsar and
	// Cassandra room for the live pipeline; 0 reads as fast as it can.
	MaxRate int

	// chain, set in a backfill's runner on the cluster (RunJob), is the
	// binary that runs the path's functions as one chain: the runner's own.
	chain *gobuild.Binary
}

// grace is how long the path of the table a switch leaves keeps following
// the ledger: Grace when set, else the view's rollbackGrace.
func (o Options) grace(v *manifest.View) time.Duration {
	if o.GraceSet {
		return o.Grace
	}
	return v.Grace()
}

func (o *Options) defaults() {
	if o.KeepOld == 0 {
		o.KeepOld = 7 * 24 * time.Hour
	}
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.ErrOut == nil {
		o.ErrOut = io.Discard
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// Result is what a finished backfill did.
type Result struct {
	View     string `json:"view"`
	Table    string `json:"table"`
	OldTable string `json:"oldTable,omitempty"`
	State    string `json:"state"`
	Diff     *Diff  `json:"diff,omitempty"`
	// Retired lists what the switch removed (old functions, subscriptions).
	Retired []string `json:"retired"`
	// Dropped lists old tables dropped because their retention passed.
	Dropped []string `json:"dropped"`
	// Until is a replay's cutoff (Options.Until); Table then holds the view
	// as of it, and the view still reads OldTable.
	Until string `json:"until,omitempty"`
	// SwitchedAt is when the view began to read Table: before the old
	// version's functions were retired, which takes a few tenths of a
	// second more. Zero for a replay, which switches nothing.
	SwitchedAt time.Time `json:"switchedAt,omitzero"`
}

// env is one connection to the cluster with the manifests loaded.
type env struct {
	set    *manifest.Set
	graph  *manifest.Graph
	view   *manifest.View
	pulsar *pulsarx.Clients
	cql    *gocql.Session
	store  recordStore
	// createStages deploys a backfill's stages: deploy.CreateStages.
	createStages func(ctx context.Context, opts Options, stages []*manifest.Stage) error
	// deleteStages deletes a backfill's stages: deploy.DeleteStages.
	deleteStages func(ctx context.Context, stages []*manifest.Stage, progress io.Writer) ([]string, error)
	// catchUpWait bounds the wait for the old path to catch up before the
	// comparison. Default 2 minutes.
	catchUpWait time.Duration
}

// recordStore keeps the backfill records: a backfillrecord.Store on the
// tenant's keyspace. A test wraps it to make a write fail between two
// steps of a backfill's state machine.
type recordStore interface {
	Ensure(ctx context.Context) error
	Put(ctx context.Context, r *backfillrecord.Record) error
	Transition(ctx context.Context, r *backfillrecord.Record, from string) (applied bool, current string, err error)
	Replace(ctx context.Context, r *backfillrecord.Record) (bool, error)
	Claim(ctx context.Context, r *backfillrecord.Record) (*backfillrecord.Record, error)
	List(ctx context.Context, view string) ([]*backfillrecord.Record, error)
	Unfinished(ctx context.Context, view string) (*backfillrecord.Record, error)
	ByTable(ctx context.Context, view, table string) (*backfillrecord.Record, error)
}

func (e *env) Close() { cqlsession.Close(e.cql) }

// cluster is what deploy.RetireExpired works on.
func (e *env) cluster() deploy.Cluster {
	return deploy.Cluster{Set: e.set, Graph: e.graph, Pulsar: e.pulsar, CQL: e.cql}
}

// recordSwitch records in the registry's history that view rec.View was
// switched at to rec.Table from rec.OldTable, whose path keeps following
// the ledger for grace.
func (e *env) recordSwitch(ctx context.Context, rec *backfillrecord.Record, by string, at time.Time, grace time.Duration) error {
	ks := e.set.Tenant.Keyspace
	if err := registry.Ensure(ctx, e.cql, ks); err != nil {
		return err
	}
	if err := registry.Record(ctx, e.cql, ks, rec.View, rec.Table, registry.Event{At: at, Kind: registry.EventActivated, By: by}); err != nil {
		return err
	}
	if rec.OldTable == "" {
		return nil
	}
	return registry.Record(ctx, e.cql, ks, rec.View, rec.OldTable, registry.Event{At: at, Kind: registry.EventDeactivated, By: by, Until: at.Add(grace)})
}

func open(ctx context.Context, opts Options) (*env, error) {
	set, graph, err := opts.Target.LoadGraph(opts.Dir)
	if err != nil {
		return nil, err
	}
	view, err := set.ViewByName(opts.View)
	if err != nil {
		return nil, fmt.Errorf("backfilling: %w: %w", err, exitcode.ErrNotFound)
	}
	pulsar, err := pulsarx.ConnectTenant(ctx, opts.Services, set.Tenant.Name)
	if err != nil {
		return nil, err
	}
	cql, err := cqlx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	e := &env{set: set, graph: graph, view: view, pulsar: pulsar, cql: cql,
		store: backfillrecord.Store{CQL: cql, Keyspace: set.Tenant.Keyspace}, catchUpWait: 2 * time.Minute}
	e.createStages = func(ctx context.Context, opts Options, stages []*manifest.Stage) error {
		return deploy.CreateStages(ctx, opts.Options, e.pulsar, e.cql, e.set, stages)
	}
	e.deleteStages = func(ctx context.Context, stages []*manifest.Stage, progress io.Writer) ([]string, error) {
		return deploy.DeleteStages(ctx, e.pulsar, stages, progress)
	}
	return e, nil
}

// Start deploys a backfill of opts.View and returns its record without
// waiting for it to catch up (Run with watch set takes it over). A view
// already backfilling is refused with ErrAlreadyRunning.
func Start(ctx context.Context, opts Options) (*backfillrecord.Record, error) {
	opts.defaults()
	e, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.start(ctx, opts)
}

func (e *env) start(ctx context.Context, opts Options) (*backfillrecord.Record, error) {
	ks, view := e.set.Tenant.Keyspace, e.view.Name
	if running, err := e.store.Unfinished(ctx, view); err != nil {
		return nil, err
	} else if running != nil {
		return nil, alreadyRunning(ks, running)
	}
	exists, err := registry.Exists(ctx, e.cql, ks)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("keyspace %s has no view registry: deploy the manifests first with foldline deploy: %w", ks, exitcode.ErrNotFound)
	}
	if err := registry.Ensure(ctx, e.cql, ks); err != nil { // its history, for a registry made before it
		return nil, err
	}
	// Paths whose rollback grace is over stop here (there is no daemon).
	if _, err := deploy.RetireExpired(ctx, e.cluster(), opts.ErrOut, time.Now()); err != nil {
		fmt.Fprintf(opts.ErrOut, "warning: retiring the paths whose rollback grace is over: %v\n", err)
	}
	entry, err := registry.Get(ctx, e.cql, ks, view)
	if err != nil {
		return nil, err
	}
	if opts.Builder == nil {
		opts.Builder = opts.NewBuilder()
	}
	path := e.graph.PathTo(view)
	// Only what changed is copied, with everything downstream of it; the
	// unchanged stages upstream are shared.
	shared, shares, err := e.sharing(ctx, opts, path)
	if err != nil {
		return nil, err
	}
	forked := manifest.ForkPathSharing(path, nextVersion(entry, e.view), shared)
	sink := forked[len(forked)-1].View
	until, err := e.applyCutoff(opts.Until, opts.UntilClock, forked, time.Now())
	if err != nil {
		return nil, err
	}
	rec := &backfillrecord.Record{View: view, Table: sink.Table(), OldTable: entry.ActiveTable, State: backfillrecord.StateRunning,
		Stages: backfillrecord.RefsOf(forked), Shares: refsOf(shares), LedgerAtStart: map[string]int64{}, StartedAt: time.Now().UTC(), Until: until}
	if len(shares) > 0 {
		names := make([]string, len(shares))
		for i, st := range shares {
			names[i] = st.Name
		}
		fmt.Fprintf(opts.ErrOut, "sharing %s (unchanged code, output kept from the first event); copying %d stage(s)\n", strings.Join(names, ", "), len(forked))
	}
	for _, st := range path {
		for _, in := range st.Inputs {
			if e.graph.Ledger[in] {
				if rec.LedgerAtStart[in], err = pulsarx.Entries(ctx, e.pulsar, in); err != nil {
					return nil, err
				}
			}
		}
	}
	engine, err := chooseEngine(opts.Engine, sum(rec.LedgerAtStart))
	if err != nil {
		return nil, err
	}
	rec.Engine = engine
	switch engine {
	case EngineFused:
		rec.Fused = &backfillrecord.FusedProgress{Runs: 1, Heartbeat: time.Now().UTC(), Every: cmp.Or(opts.Checkpoint, defaultCheckpointEvery)}
	case EngineCluster:
		// No run yet: the runner counts each of its runs (RunJob).
		rec.Fused = &backfillrecord.FusedProgress{Heartbeat: time.Now().UTC(), Every: cmp.Or(opts.Checkpoint, defaultCheckpointEvery)}
	}
	// Recorded before anything is deployed: a second start is refused and
	// --abort can clean up whatever a failed start left behind.
	if err := e.store.Ensure(ctx); err != nil {
		return nil, err
	}
	if running, err := e.store.Claim(ctx, rec); err != nil {
		return nil, err
	} else if running != nil {
		return nil, alreadyRunning(ks, running)
	}
	definition, err := json.Marshal(sink.Schema())
	if err != nil {
		return nil, fmt.Errorf("encoding the definition of view %s: %w", view, err)
	}
	if err := registry.RegisterBuilding(ctx, e.cql, ks, view, rec.Table, string(definition)); err != nil {
		return nil, err
	}
	if rec.Until != "" {
		fmt.Fprintf(opts.ErrOut, "replaying %s as of %s into %s.%s (active: %s, not switched) over %d ledger entries\n", view, rec.Until, ks, rec.Table, orNone(rec.OldTable), sum(rec.LedgerAtStart))
	} else {
		fmt.Fprintf(opts.ErrOut, "backfilling %s into %s.%s (active: %s) over %d ledger entries\n", view, ks, rec.Table, orNone(rec.OldTable), sum(rec.LedgerAtStart))
	}
	return rec, e.bringUp(ctx, opts, rec, forked, false)
}

// bringUp deploys rec's copy of the path (forked), first running it on
// this machine over the ledger when rec's engine is fused and its run is
// not done (resumed: from rec's checkpoint on).
func (e *env) bringUp(ctx context.Context, opts Options, rec *backfillrecord.Record, forked []*manifest.Stage, resumed bool) (err error) {
	view := rec.View
	sink := forked[len(forked)-1].View
	fused := (rec.Engine == EngineFused || rec.Engine == EngineCluster) && rec.Fused != nil && !rec.Fused.Done
	onCluster := rec.Engine == EngineCluster
	path := e.graph.PathTo(view)
	shares := backfillrecord.StagesOf(rec.Shares)
	// The binaries the copy deploys are built at once, all of them, while
	// a fused run starts: it takes the ones it runs from the same builder.
	if opts.Builder == nil {
		opts.Builder = opts.NewBuilder()
	}
	prebuilt := make(chan struct{})
	go func() {
		defer close(prebuilt)
		_ = opts.Builder.BuildAll(ctx, manifest.Binaries(forked)) // an error comes again from the Build that needs it
	}()
	if onCluster && !fused {
		// Its run is done: its runner goes, if no CLI removed it.
		if _, err := e.removeRunner(ctx, opts, forked); err != nil {
			return err
		}
	}
	if fused && !onCluster {
		// The fused run's binary of the path's chain too, while the table
		// is made (the run says why when there is none).
		chained := make(chan struct{})
		go func() {
			defer close(chained)
			localrun.PrepareChain(ctx, forked, localBuilder(opts))
		}()
		defer func() { <-chained }()
	}
	defer func() { <-prebuilt }()
	if !resumed {
		// The registry's history of the new table: the code that builds
		// it, from the ledger's first event (recorded once the binaries
		// are built, without holding the run up).
		recorded := make(chan error, 1)
		table, until := rec.Table, rec.Until
		go func() { recorded <- e.recordBuilt(ctx, opts, view, table, until, path, forked, shares) }()
		defer func() {
			if rerr := <-recorded; rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	if fused {
		// The copy's stages that read nothing from outside the copy (the
		// ledger, a shared stage's output) only read topics of the copy,
		// empty until its first stages start after the fused run: they
		// are deployed while it runs.
		outside := sources(forked)
		var early []*manifest.Stage
		for _, st := range forked {
			if !slices.ContainsFunc(st.Inputs, func(in string) bool { return slices.Contains(outside, in) }) {
				early = append(early, st)
			}
		}
		// The table first: the fused run and the early sink would both
		// create it, and two creates of one table at once can disagree.
		schema := sink.Schema()
		if err := cassandra.EnsureSchema(ctx, e.cql, schema, cassandra.Replication(e.set.Tenant.Replication)); err != nil {
			return fmt.Errorf("creating table %s.%s of view %s: %w", schema.Keyspace, schema.Table, view, err)
		}
		deployed := make(chan error, 1)
		go func() { deployed <- e.createStages(ctx, opts, early) }()
		var err error
		if onCluster {
			err = e.fuseOnCluster(ctx, opts, forked, rec)
		} else {
			_, err = e.fuse(ctx, opts, forked, rec)
		}
		// Waited for either way: nothing is left creating functions behind an --abort.
		if err = errors.Join(err, <-deployed); err != nil {
			if onCluster {
				return fmt.Errorf("%w (the run on the cluster goes on: foldline backfill --watch %s follows it; --abort %s removes it)", err, view, view)
			}
			return fmt.Errorf("%w (foldline backfill %s resumes it from its checkpoint; --abort %s removes what it left; --engine deployed runs it on the functions worker)", err, view, view)
		}
	}
	if err := e.createStages(ctx, opts, forked); err != nil {
		return fmt.Errorf("deploying the backfill of %s (see foldline status; foldline backfill --abort %s removes it): %w", view, view, err)
	}
	return nil
}

// resume takes over rec, a fused backfill whose run stopped before it was
// done (its CLI died: FusedStalled), and runs it again from its checkpoint,
// with the path and code it started with: manifests or binaries changed
// since are refused (--abort, then start again). Of two CLIs resuming it at
// once, one does; the other is refused with ErrAlreadyRunning.
func (e *env) resume(ctx context.Context, opts Options, rec *backfillrecord.Record) error {
	forked, err := e.forkedOf(rec)
	if err != nil {
		return fmt.Errorf("resuming the backfill of %s: %w", rec.View, err)
	}
	if opts.Builder == nil {
		opts.Builder = opts.NewBuilder()
	}
	if err := e.sameCode(ctx, opts, rec, forked); err != nil {
		return err
	}
	stopped := time.Since(rec.Fused.Heartbeat)
	if applied, err := e.claimRun(ctx, rec); err != nil {
		return err
	} else if !applied {
		return fmt.Errorf("resuming the backfill of %s: another foldline backfill took it over: %w", rec.View, ErrAlreadyRunning)
	}
	fmt.Fprintf(opts.ErrOut, "the fused run of the backfill of %s stopped %s ago with %d ledger events written: resuming it from there\n",
		rec.View, stopped.Round(time.Second), rec.Fused.Events)
	return e.bringUp(ctx, opts, rec, forked, true)
}

// claimRun counts one more run of rec's fused run, with a fresh heartbeat,
// as a compare-and-set on the record: applied false when it changed
// meanwhile (another run claimed it). rec is the claimed record after.
func (e *env) claimRun(ctx context.Context, rec *backfillrecord.Record) (applied bool, err error) {
	claim := *rec
	fused := *rec.Fused
	fused.Runs++
	fused.Heartbeat = time.Now().UTC()
	claim.Fused = &fused
	if applied, err = e.store.Replace(ctx, &claim); err == nil && applied {
		*rec = claim
	}
	return applied, err
}

// forkedOf returns rec's copy of its view's path, as the manifests give
// it: refused when they no longer give the stages it started with.
func (e *env) forkedOf(rec *backfillrecord.Record) ([]*manifest.Stage, error) {
	version, ok := backfillrecord.TableVersion(rec.Table)
	if !ok {
		return nil, fmt.Errorf("table %s has no version", rec.Table)
	}
	shared := map[string]string{}
	for _, ref := range rec.Shares {
		shared[manifest.UnforkedName(ref.Name)] = ref.Output
	}
	forked := manifest.ForkPathSharing(e.graph.PathTo(rec.View), version, shared)
	names := func(refs []backfillrecord.StageRef) []string {
		out := make([]string, len(refs))
		for i, r := range refs {
			out[i] = r.FullName()
		}
		return out
	}
	if !slices.Equal(names(backfillrecord.RefsOf(forked)), names(rec.Stages)) {
		return nil, fmt.Errorf("the manifests' path is not the one it started with (%v, now %v): foldline backfill --abort %s, then start again", names(rec.Stages), names(backfillrecord.RefsOf(forked)), rec.View)
	}
	return forked, nil
}

// sameCode refuses to resume rec with code other than the code its table's
// history says built it.
func (e *env) sameCode(ctx context.Context, opts Options, rec *backfillrecord.Record, forked []*manifest.Stage) error {
	history, err := registry.History(ctx, e.cql, e.set.Tenant.Keyspace, rec.View)
	if err != nil {
		return err
	}
	built, ok := registry.CurrentCode(history[rec.Table])
	if !ok {
		return nil // not recorded (its start died first): nothing to compare with
	}
	codes, err := deploy.StageCodes(ctx, opts.Builder, forked)
	if err != nil {
		return err
	}
	for _, c := range codes {
		if b, ok := built[c.Stage]; ok && (b.Binary != c.Binary || b.Config != "" && b.Config != c.Config) {
			return fmt.Errorf("resuming the backfill of %s: %s's code changed since it started (binary %.12s → %.12s): the table would mix two codes; foldline backfill --abort %s, then start again", rec.View, c.Stage, b.Binary, c.Binary, rec.View)
		}
	}
	return nil
}

// recordBuilt records in the registry's history that table, a version of
// view, is built by the code of forked from the ledger's first event (up
// to until, for a replay).
func (e *env) recordBuilt(ctx context.Context, opts Options, view, table, until string, path, forked, shares []*manifest.Stage) error {
	codes, err := pathCodes(ctx, opts, path, forked, shares)
	if err != nil {
		return err
	}
	note := "a backfill: its copy of the path read the ledger from its first event"
	if until != "" {
		note = "a replay as of " + until + ": its copy of the path read the ledger from its first event up to there"
	}
	return registry.Record(ctx, e.cql, e.set.Tenant.Keyspace, view, table, registry.Event{Kind: registry.EventBuilt, By: "backfill", Stages: codes, Note: note})
}

// alreadyRunning refuses a second backfill of running's view.
func alreadyRunning(keyspace string, running *backfillrecord.Record) error {
	view := running.View
	if running.FusedUnfinished() {
		f := running.Fused
		return fmt.Errorf("view %s is already backfilling into %s.%s: its fused run on a CLI's machine wrote its checkpoint %s ago (%d ledger events written); if that CLI died, run foldline backfill %s again once it has missed its heartbeat for %s, and it resumes from the checkpoint (or --abort %s): %w",
			view, keyspace, running.Table, time.Since(f.Heartbeat).Round(time.Second), f.Events, view, max(5*f.Every, 2*time.Second), view, ErrAlreadyRunning)
	}
	return fmt.Errorf("view %s is already backfilling into %s.%s (started %s): follow it with foldline backfill --watch %s, or drop it with foldline backfill --abort %s: %w",
		view, keyspace, running.Table, running.StartedAt.Format(time.RFC3339), view, view, ErrAlreadyRunning)
}

// nextVersion is the table version a backfill fills: the manifests' for a
// view never registered (a new view), else one past every version the
// registry knows (and at least the manifests').
func nextVersion(entry registry.Entry, v *manifest.View) int {
	if len(entry.Versions) == 0 {
		return v.Version
	}
	highest := 0
	for _, ver := range entry.Versions {
		if n, ok := backfillrecord.TableVersion(ver.Table); ok {
			highest = max(highest, n)
		}
	}
	return max(highest+1, v.Version)
}

// Run starts a backfill of opts.View (or takes over the running one when
// watch is set) and watches it until it has switched.
func Run(ctx context.Context, opts Options, watch bool) (*Result, error) {
	opts.defaults()
	e, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rec, err := e.store.Unfinished(ctx, e.view.Name)
	if err != nil {
		return nil, err
	}
	switch {
	case watch && rec == nil:
		return nil, fmt.Errorf("view %s: %w (start one with foldline backfill %s): %w", e.view.Name, ErrNoBackfill, e.view.Name, exitcode.ErrNotFound)
	case rec != nil && rec.FusedStalled(time.Now()):
		// Its CLI died during the fused run: this one carries on from the
		// checkpoint.
		if err := e.resume(ctx, opts, rec); err != nil {
			return nil, err
		}
	case rec != nil && (rec.ClusterUnfinished() || rec.FusedDone()):
		// Its run goes on on the cluster, or it is done and the CLI that
		// followed it may have died before it deployed the copy (a run on
		// the cluster ends with none watching): this CLI follows it, and
		// deploys the copy from where it stopped; what is deployed stays.
		forked, err := e.forkedOf(rec)
		if err != nil {
			return nil, fmt.Errorf("following the backfill of %s: %w", rec.View, err)
		}
		if err := e.bringUp(ctx, opts, rec, forked, true); err != nil {
			return nil, err
		}
	case !watch:
		if rec, err = e.start(ctx, opts); err != nil {
			return nil, err
		}
	}
	return e.watch(ctx, opts, rec)
}

// watch polls rec's progress until every stage has caught up twice in a
// row, then finishes it. A backfill recorded as switching has caught up
// already: its switch is completed.
func (e *env) watch(ctx context.Context, opts Options, rec *backfillrecord.Record) (*Result, error) {
	if rec.State == backfillrecord.StateSwitching {
		fmt.Fprintf(opts.ErrOut, "the backfill of %s was switching to %s: completing the switch\n", rec.View, rec.Table)
		return e.finish(ctx, opts, rec)
	}
	var deadline time.Time
	if opts.Timeout > 0 {
		deadline = time.Now().Add(opts.Timeout)
	}
	tty := progress.IsTerminal(opts.ErrOut)
	var drawn drawState
	stalls := stallWatch{}
	caughtUp := 0
	soon := confirmAfter
	for {
		threshold := opts.Threshold
		if rec.Until != "" {
			threshold = 0 // a replay ends exact: nothing left anywhere
		}
		snap, err := snapshot(ctx, e.pulsar, rec, threshold, time.Now())
		if err != nil {
			return nil, err
		}
		stalls.mark(snap)
		opts.Progress.observe(snap)
		if snap.CaughtUp {
			caughtUp++
		} else {
			caughtUp = 0
		}
		done := caughtUp >= 2
		if err := opts.emit(snap, tty, done, &drawn); err != nil {
			return nil, err
		}
		if done && rec.Until != "" {
			return e.finishReplay(ctx, opts, rec)
		}
		if done {
			return e.finish(ctx, opts, rec)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil, fmt.Errorf("watching the backfill of %s for %s: %w (it goes on: foldline backfill --watch %s)", rec.View, opts.Timeout, ErrNotCaughtUp, rec.View)
		}
		wait := opts.Poll
		if caughtUp > 0 {
			wait = min(wait, confirmAfter) // only the confirmation is left
		} else if left, ok := snap.timeLeft(); ok {
			// Looked at again when it should be done, not up to a poll
			// later; sooner each time at first, less often while a tail
			// takes longer than it should.
			wait = min(wait, max(left, soon))
			soon = min(2*soon, opts.Poll)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("watching the backfill of %s: %w", rec.View, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// confirmAfter is how soon the watch looks again once every stage has
// caught up, to confirm it (a second snapshot, of stats the broker keeps
// anyway) before it finishes.
const confirmAfter = 250 * time.Millisecond

// emit prints a snapshot: every one as a JSON line with -o json; as text on
// ErrOut every few seconds and at the end, or, on a terminal, redrawn in
// place every poll.
func (o Options) emit(s *Snapshot, tty, final bool, drawn *drawState) error {
	if o.JSON {
		if err := json.NewEncoder(o.Out).Encode(s); err != nil {
			return fmt.Errorf("writing a progress snapshot: %w", err)
		}
		return nil
	}
	if !tty && !final && time.Since(drawn.at) < 5*time.Second {
		return nil
	}
	var buf bytes.Buffer
	s.Write(&buf, tty)
	if tty && drawn.lines > 0 {
		fmt.Fprintf(o.ErrOut, "\033[%dA\033[J", drawn.lines) // back over the last drawing
	}
	drawn.at, drawn.lines = time.Now(), bytes.Count(buf.Bytes(), []byte("\n"))
	_, err := o.ErrOut.Write(buf.Bytes())
	return err
}

// stallAfter is how long a stage with a backlog may go without
// acknowledging anything before the watch calls it stalled.
const stallAfter = time.Minute

// stallWatch remembers when each stage last made progress, so that a
// backfill that cannot progress (a stage failing every message into
// retries, a consumer stuck) says so instead of waiting silently.
type stallWatch map[string]struct {
	done  int64
	since time.Time
}

func (w stallWatch) mark(s *Snapshot) {
	for i := range s.Stages {
		p := &s.Stages[i]
		last, seen := w[p.Name]
		if !seen || p.Done != last.done || p.Backlog == 0 {
			last.done, last.since = p.Done, s.At
			w[p.Name] = last
			continue
		}
		if stalled := s.At.Sub(last.since); stalled >= stallAfter {
			msg := fmt.Sprintf("no progress for %s with %d entries of backlog", stalled.Round(time.Second), p.Backlog)
			if p.Problem != "" {
				msg += "; " + p.Problem
			}
			p.Problem = msg
		}
	}
}

// drawState is what emit remembers of its last drawing.
type drawState struct {
	at    time.Time
	lines int
}

// finish ends a backfill that has caught up in steps, each recorded
// before the next is taken, so that wherever it stops (a crash, a failed
// write) a re-run of --watch or --abort finds out how far it got:
//
//  1. running: the old path catches up, the tables are compared, the diff
//     is recorded;
//  2. switching is recorded, before anything changes;
//  3. the registry switches the view to the new table;
//  4. the registry's history records the switch: the old table keeps
//     following the ledger for the rollback grace (Options.Grace); the
//     paths whose grace is over, the old one at once for a grace of 0,
//     are retired (deploy.RetireExpired);
//  5. switched is recorded; old tables past their retention are dropped.
//
// A switching record resumes at step 3, and steps 3 to 5 are idempotent.
// --abort refuses a backfill whose table the registry points at.
func (e *env) finish(ctx context.Context, opts Options, rec *backfillrecord.Record) (*Result, error) {
	ks := e.set.Tenant.Keyspace
	res := &Result{View: rec.View, Table: rec.Table, OldTable: rec.OldTable, State: rec.State, Retired: []string{}, Dropped: []string{}}
	oldPath, err := e.currentPath(ctx, rec.View, rec.OldTable)
	if err != nil {
		return nil, err
	}
	if rec.State == backfillrecord.StateRunning {
		if err := e.compare(ctx, opts, rec, oldPath); err != nil {
			res.Diff = rec.Diff
			return res, err
		}
		rec.State = backfillrecord.StateSwitching
		applied, current, err := e.store.Transition(ctx, rec, backfillrecord.StateRunning)
		switch {
		case err != nil:
			return nil, err
		case !applied && current != backfillrecord.StateSwitching:
			return nil, fmt.Errorf("switching %s to %s: the backfill is %s meanwhile (foldline backfill --abort?): %w", rec.View, rec.Table, orNone(current), ErrNoBackfill)
		}
	}
	res.Diff = rec.Diff
	// Only from building: an --abort that marked the table first wins,
	// and one that comes after is refused before it removes anything.
	if _, err := registry.Switch(ctx, e.cql, ks, rec.View, rec.Table); err != nil {
		return nil, err
	}
	res.SwitchedAt = time.Now().UTC()
	grace := opts.grace(e.view)
	fmt.Fprintf(opts.ErrOut, "view %s now reads %s.%s (was %s)\n", rec.View, ks, rec.Table, orNone(rec.OldTable))
	// The old path keeps following the ledger for the rollback grace, so
	// that views --activate of the old table gives an up-to-date one;
	// RetireExpired stops it after (at once for a grace of 0), and the
	// paths of earlier versions whose grace is over.
	if err := e.recordSwitch(ctx, rec, "backfill", res.SwitchedAt, grace); err != nil {
		return nil, err
	}
	if rec.OldTable != "" && grace > 0 {
		fmt.Fprintf(opts.ErrOut, "%s.%s keeps following the ledger until %s (rollback: foldline views --activate %s)\n", ks, rec.OldTable, res.SwitchedAt.Add(grace).Format(time.RFC3339), rec.OldTable)
	}
	retired, err := deploy.RetireExpired(ctx, e.cluster(), opts.ErrOut, time.Now())
	for _, r := range retired {
		res.Retired = append(res.Retired, r.Removed...)
	}
	if err != nil {
		return nil, fmt.Errorf("retiring the old functions of %s (foldline backfill --watch %s completes the switch): %w", rec.View, rec.View, err)
	}
	if res.Retired == nil {
		res.Retired = []string{}
	}
	rec.State, rec.FinishedAt, rec.KeepOldUntil = backfillrecord.StateSwitched, time.Now().UTC(), time.Now().Add(opts.KeepOld).UTC()
	if err := e.store.Put(ctx, rec); err != nil {
		return nil, err
	}
	res.State = rec.State
	res.Dropped, err = e.dropExpired(ctx, rec.View)
	return res, err
}

// compare waits for the old path to catch up, compares the old and new
// tables and records the diff; with --require-identical a difference, or
// an old path that has not caught up, is an error and rec stays running.
// A view that had no table has nothing to compare.
func (e *env) compare(ctx context.Context, opts Options, rec *backfillrecord.Record, oldPath []*manifest.Stage) error {
	if rec.OldTable == "" {
		return nil
	}
	ks := e.set.Tenant.Keyspace
	if err := e.oldCaughtUp(ctx, opts, rec, oldPath); err != nil {
		if !errors.Is(err, ErrOldNotCaughtUp) || opts.RequireIdentical {
			return fmt.Errorf("backfill of %s: comparing %s.%s with %s.%s: %w (it keeps running: foldline backfill --watch %s tries again, --abort %s drops it)",
				rec.View, ks, rec.Table, ks, rec.OldTable, err, rec.View, rec.View)
		}
		fmt.Fprintf(opts.ErrOut, "comparing anyway (a difference may be the old version's lag): %v\n", err)
	}
	oldSchema, err := e.registeredSchema(ctx, rec.View, rec.OldTable)
	if err != nil {
		return err
	}
	newSchema, err := e.registeredSchema(ctx, rec.View, rec.Table)
	if err != nil {
		return err
	}
	if rec.Diff, err = compareTables(ctx, e.cql, oldSchema, newSchema); err != nil {
		return err
	}
	if err := e.store.Put(ctx, rec); err != nil {
		return err
	}
	if !opts.JSON {
		fmt.Fprintf(opts.ErrOut, "%s.%s vs %s.%s: %s\n", ks, rec.OldTable, ks, rec.Table, rec.Diff)
		for _, ex := range rec.Diff.Examples {
			fmt.Fprintln(opts.ErrOut, "  "+ex)
		}
	}
	if opts.RequireIdentical && !rec.Diff.Identical() {
		return fmt.Errorf("backfill of %s: %s: %w (it keeps running: foldline backfill --abort %s drops it; without --require-identical it switches)",
			rec.View, rec.Diff, ErrNotIdentical, rec.View)
	}
	return nil
}

// currentPath returns the stages that fill table: the path of the backfill
// that built it, or the manifests' path when deploy did. No table, no path.
func (e *env) currentPath(ctx context.Context, view, table string) ([]*manifest.Stage, error) {
	if table == "" {
		return nil, nil
	}
	rec, err := e.store.ByTable(ctx, view, table)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.MayCarry() {
		return rec.Path(), nil
	}
	return e.graph.PathTo(view), nil
}

// oldCaughtUp waits, up to e.catchUpWait, until the old path (the stages
// filling the active table) has reached the point of the ledger the new
// path had when it caught up: every stage past the ledger's size at the
// backfill's start, with a backlog of at most the threshold. Only then do
// the two tables hold the same events. A stage without its subscription
// cannot be measured: that is reported at once. Either is an
// ErrOldNotCaughtUp error that says which stage is behind.
func (e *env) oldCaughtUp(ctx context.Context, opts Options, rec *backfillrecord.Record, path []*manifest.Stage) error {
	old := &backfillrecord.Record{View: rec.View, Table: rec.OldTable, State: backfillrecord.StateRunning,
		Stages: backfillrecord.RefsOf(path), LedgerAtStart: rec.LedgerAtStart, StartedAt: rec.StartedAt}
	deadline := time.Now().Add(e.catchUpWait)
	for {
		snap, err := snapshot(ctx, e.pulsar, old, opts.Threshold, time.Now())
		if err != nil {
			return err
		}
		if snap.CaughtUp {
			return nil
		}
		behind, measurable := lagging(snap, opts.Threshold)
		if !measurable {
			return fmt.Errorf("cannot tell how far the old version is: %s: %w", behind, ErrOldNotCaughtUp)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after waiting %s, %s: %w", e.catchUpWait, behind, ErrOldNotCaughtUp)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opts.Poll):
		}
	}
}

// lagging describes the first stage of s that has not caught up, and
// reports whether it can be measured at all (it has its subscriptions).
func lagging(s *Snapshot, threshold int64) (string, bool) {
	for _, p := range s.Stages {
		switch {
		case p.unsubscribed > 0:
			return fmt.Sprintf("%s has no subscription %s on %d of its inputs", p.Name, p.Subscription, p.unsubscribed), false
		case p.Done < p.Total:
			return fmt.Sprintf("%s has done %d of the %d ledger entries the new version did", p.Name, p.Done, p.Total), true
		case p.Backlog > threshold:
			return fmt.Sprintf("%s has %d entries of backlog", p.Name, p.Backlog), true
		}
	}
	return "its progress cannot be read", false
}

// registeredSchema returns a table's definition from the registry.
func (e *env) registeredSchema(ctx context.Context, view, table string) (cassandra.ViewSchema, error) {
	var schema cassandra.ViewSchema
	entry, err := registry.Get(ctx, e.cql, e.set.Tenant.Keyspace, view)
	if err != nil {
		return schema, err
	}
	for _, v := range entry.Versions {
		if v.Table == table {
			if err := json.Unmarshal([]byte(v.Definition), &schema); err != nil {
				return schema, fmt.Errorf("reading the registered definition of %s: %w", table, err)
			}
			schema.Keyspace, schema.Table = e.set.Tenant.Keyspace, table
			return schema, nil
		}
	}
	return schema, fmt.Errorf("reading the definition of %s: %w", table, registry.ErrUnknownTable)
}

// dropExpired drops the old tables of view's switched backfills whose
// retention has passed, unless one of them is active again (rolled back).
func (e *env) dropExpired(ctx context.Context, view string) ([]string, error) {
	ks := e.set.Tenant.Keyspace
	records, err := e.store.List(ctx, view)
	if err != nil {
		return nil, err
	}
	entry, err := registry.Get(ctx, e.cql, ks, view)
	if err != nil {
		return nil, err
	}
	registered := map[string]bool{}
	for _, v := range entry.Versions {
		registered[v.Table] = true
	}
	dropped := []string{}
	for _, r := range records {
		old := r.OldTable
		if r.State != backfillrecord.StateSwitched || old == "" || old == entry.ActiveTable || !registered[old] || time.Now().Before(r.KeepOldUntil) {
			continue
		}
		err := registry.Drop(ctx, e.cql, ks, view, old)
		switch {
		case errors.Is(err, registry.ErrActiveTable):
			continue // activated again since the registry was read
		case err != nil:
			return dropped, fmt.Errorf("dropping an old table of %s: %w", view, err)
		}
		registered[old] = false
		dropped = append(dropped, ks+"."+old)
	}
	return dropped, nil
}

// Abort removes view's unfinished backfill: its functions and
// subscriptions, its topics, its table and the table's registration. The
// active table is untouched: a backfill whose table the registry points at
// (a switch made but not recorded as complete) is refused with
// registry.ErrActiveTable before anything is removed, and the drop itself
// checks the registry again.
func Abort(ctx context.Context, opts Options) (*backfillrecord.Record, error) {
	opts.defaults()
	e, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.abort(ctx, opts)
}

func (e *env) abort(ctx context.Context, opts Options) (*backfillrecord.Record, error) {
	ks := e.set.Tenant.Keyspace
	rec, err := e.store.Unfinished(ctx, e.view.Name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("view %s: %w (to go back to an older table after a switch: foldline views --activate TABLE): %w", e.view.Name, ErrNoBackfill, exitcode.ErrNotFound)
	}
	entry, err := registry.Get(ctx, e.cql, ks, rec.View)
	if err != nil {
		return nil, err
	}
	if entry.ActiveTable == rec.Table {
		back := ""
		if rec.OldTable != "" {
			back = fmt.Sprintf(", or go back with foldline views --activate %s and then abort", rec.OldTable)
		}
		return nil, fmt.Errorf("aborting the backfill of %s: the view already reads %s.%s (the backfill is %s): complete it with foldline backfill --watch %s%s: %w: %w",
			rec.View, ks, rec.Table, rec.State, rec.View, back, registry.ErrActiveTable, exitcode.ErrUsage)
	}
	// Taken out of building before anything is removed, as a lightweight
	// transaction that a --watch's switch (registry.Switch) is serialized
	// with: if the switch came first, the abort is refused here.
	if err := registry.MarkAborting(ctx, e.cql, ks, rec.View, rec.Table); err != nil {
		if errors.Is(err, registry.ErrActiveTable) {
			return nil, fmt.Errorf("aborting the backfill of %s: the view reads %s.%s since a switch completed meanwhile: %w: %w", rec.View, ks, rec.Table, err, exitcode.ErrUsage)
		}
		return nil, err
	}
	if _, err := e.removeStages(ctx, opts, rec); err != nil {
		return nil, err
	}
	if err := registry.Drop(ctx, e.cql, ks, rec.View, rec.Table); err != nil {
		return nil, fmt.Errorf("aborting the backfill of %s: %w", rec.View, err)
	}
	rec.State, rec.FinishedAt = backfillrecord.StateAborted, time.Now().UTC()
	if err := e.store.Put(ctx, rec); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.ErrOut, "aborted the backfill of %s into %s.%s\n", rec.View, ks, rec.Table)
	return rec, nil
}

// removeStages deletes a backfill's functions and subscriptions (downstream
// first) and the topics it created (outputs, dead letters), and returns
// what it deleted.
func (e *env) removeStages(ctx context.Context, opts Options, rec *backfillrecord.Record) ([]string, error) {
	stages := backfillrecord.StagesOf(rec.Stages)
	var deleted []string
	if rec.Engine == EngineCluster && len(stages) > 0 {
		removed, err := e.removeRunner(ctx, opts, stages)
		if deleted = removed; err != nil {
			return deleted, err
		}
	}
	removed, err := e.deleteStages(ctx, stages, opts.ErrOut)
	if deleted = append(deleted, removed...); err != nil {
		return deleted, err
	}
	dropped, err := deploy.DropStateTables(ctx, e.cql, e.set.Tenant.Keyspace, stages, opts.ErrOut)
	deleted = append(deleted, dropped...)
	if err != nil {
		return deleted, err
	}
	var topics []string
	for _, ref := range rec.Stages {
		for _, t := range []string{ref.Output, ref.DeadLetterTopic} {
			if t != "" {
				topics = append(topics, t)
			}
		}
	}
	if err := deploy.DeleteTopics(ctx, e.pulsar, topics); err != nil {
		return deleted, err
	}
	return append(deleted, topics...), nil
}

// Running returns a progress snapshot of every running backfill of
// keyspace, for foldline status.
func Running(ctx context.Context, pulsar *pulsarx.Clients, cql *gocql.Session, keyspace string) ([]*Snapshot, error) {
	records, err := backfillrecord.Store{CQL: cql, Keyspace: keyspace}.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []*Snapshot
	for _, r := range records {
		if !r.Unfinished() {
			continue
		}
		s, err := snapshot(ctx, pulsar, r, 0, time.Now())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func orNone(table string) string {
	if table == "" {
		return "none"
	}
	return table
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
