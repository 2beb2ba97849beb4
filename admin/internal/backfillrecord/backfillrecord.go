// Package backfillrecord keeps the record of each backfill in the tenant's
// keyspace (table foldline_backfills, next to the view registry): which
// functions it deployed, the ledger's size when it started, its state and
// its comparison. The record outlives the CLI that started the backfill, so
// that status shows it, --watch and --abort take it over, and deploy and
// destroy know which functions now carry a view.
package backfillrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlname"
)

// Table is where backfills are recorded, in each tenant keyspace.
const Table = "foldline_backfills"

// The states of a backfill.
const (
	// StateRunning: its functions run; not switched yet.
	StateRunning = "running"
	// StateSwitching: it caught up and was chosen to switch. It is
	// recorded before the registry moves, so that a failure at any later
	// step leaves a record that says so: the registry may point at its
	// table or not yet, the old path may be retired or not yet. --watch
	// completes the switch; --abort removes it only while the registry
	// does not point at its table.
	StateSwitching = "switching"
	// StateSwitched: its table became the active one.
	StateSwitched = "switched"
	// StateAborted: its functions, topics and table were removed.
	StateAborted = "aborted"
	// StateSnapshot: a replay (Until set) finished: its table holds the
	// view as of the cutoff; its functions and topics were removed.
	StateSnapshot = "snapshot"
)

// unfinished reports whether a backfill in state needs a --watch or an
// --abort: running or switching.
func unfinished(state string) bool { return state == StateRunning || state == StateSwitching }

// StageRef is a deployed stage of a backfill: enough to watch and delete it.
type StageRef struct {
	Kind      string   `json:"kind"`
	Name      string   `json:"name"`
	Tenant    string   `json:"tenant"`
	Namespace string   `json:"namespace"`
	Inputs    []string `json:"inputs"`
	Output    string   `json:"output,omitempty"`
	SubName   string   `json:"subName"`
	// DeadLetterTopic is where the stage puts what it cannot process.
	DeadLetterTopic string `json:"deadLetterTopic,omitempty"`
}

// FullName is tenant/namespace/name.
func (s StageRef) FullName() string { return s.Tenant + "/" + s.Namespace + "/" + s.Name }

// RefOf describes a stage for the record.
func RefOf(st *manifest.Stage) StageRef {
	return StageRef{Kind: string(st.Kind), Name: st.Name, Tenant: st.Tenant, Namespace: st.Namespace,
		Inputs: st.Inputs, Output: st.Output, SubName: st.SubName, DeadLetterTopic: st.DeadLetterTopic()}
}

// RefsOf describes stages for the record.
func RefsOf(stages []*manifest.Stage) []StageRef {
	refs := make([]StageRef, len(stages))
	for i, st := range stages {
		refs[i] = RefOf(st)
	}
	return refs
}

// StagesOf turns refs back into stages (to watch or delete them).
func StagesOf(refs []StageRef) []*manifest.Stage {
	stages := make([]*manifest.Stage, len(refs))
	for i, r := range refs {
		stages[i] = &manifest.Stage{Kind: manifest.StageKind(r.Kind), Name: r.Name, Tenant: r.Tenant,
			Namespace: r.Namespace, Inputs: r.Inputs, Output: r.Output, SubName: r.SubName}
	}
	return stages
}

// RunnerOf names the runner of a backfill on the cluster (foldline backfill
// --engine cluster) whose copy is forked (the sink last) and its input, the
// topic of its job: a function beside the copy's sink, after it.
func RunnerOf(forked []*manifest.Stage) *manifest.Stage {
	sink := forked[len(forked)-1]
	name := sink.Name + "-runner"
	return &manifest.Stage{Tenant: sink.Tenant, Namespace: sink.Namespace, Name: name, SubName: name,
		Inputs: []string{"persistent://" + sink.Tenant + "/" + sink.Namespace + "/" + name + "-job"}}
}

// Runner returns r's runner (RunnerOf) while r runs on the cluster, else
// nil.
func (r *Record) Runner() *manifest.Stage {
	if r.Engine != "cluster" || !r.Unfinished() || len(r.Stages) == 0 {
		return nil
	}
	return RunnerOf(StagesOf(r.Stages))
}

// Record is one backfill of one view into one new table.
type Record struct {
	View string `json:"view"`
	// Table is the table the backfill fills; OldTable the one active when
	// it started ("" for a view that had none).
	Table    string `json:"table"`
	OldTable string `json:"oldTable,omitempty"`
	State    string `json:"state"`
	// Stages are the backfill's functions, upstream first.
	Stages []StageRef `json:"stages"`
	// Shares are the functions upstream of Stages that the backfill did
	// not copy, since their code is the manifests' and their output
	// topics hold every event's outputs: its first stages read those
	// topics from the earliest. They run for other tables too (they are
	// deploy's, or another backfill's), and are never the backfill's to
	// delete.
	Shares []StageRef `json:"shares,omitempty"`
	// LedgerAtStart is each ledger topic's size (entries) when it started:
	// what "caught up" is measured against.
	LedgerAtStart map[string]int64 `json:"ledgerAtStart"`
	StartedAt     time.Time        `json:"startedAt"`
	FinishedAt    time.Time        `json:"finishedAt,omitzero"`
	// KeepOldUntil is when the old table may be dropped (after a switch).
	KeepOldUntil time.Time `json:"keepOldUntil,omitzero"`
	// Diff is the comparison of the old and new tables before the switch.
	Diff  *Diff  `json:"diff,omitempty"`
	Error string `json:"error,omitempty"`
	// Until is the cutoff of a replay as of a point of the ledger (an RFC
	// 3339 publish time or a ledger position), "" for a backfill that
	// follows the ledger and switches.
	Until string `json:"until,omitempty"`
	// Engine is how the copy catches up (fused or deployed; "" for a
	// backfill recorded before engines were: deployed).
	Engine string `json:"engine,omitempty"`
	// Fused is the progress of a fused engine's run on the CLI's machine,
	// for a fused backfill: another foldline backfill resumes it from its
	// checkpoint when the run's heartbeat has stopped.
	Fused *FusedProgress `json:"fused,omitempty"`

	// raw is the record as it was last read or written (JSON), for Replace.
	raw string
}

// FusedProgress is a fused run's checkpoint and heartbeat.
type FusedProgress struct {
	// Positions maps each ledger topic (a partition of a partitioned one)
	// to the last event read whose view operations, and those of every
	// event before it, the sink's applier confirmed written, and whose
	// dead letters are published: a run resumes by reading its entry
	// again (the sink skips what it applied).
	Positions map[string]Position `json:"positions,omitempty"`
	// Events counts the ledger events the checkpoint covers.
	Events int64 `json:"events"`
	// Heartbeat is when the run last wrote its checkpoint (every few
	// seconds, with or without progress).
	Heartbeat time.Time `json:"heartbeat"`
	// Done says the run is over and the copy's ledger subscriptions start
	// where it stopped.
	Done bool `json:"done,omitempty"`
	// Runs counts the runs: 1, and one more per resume.
	Runs int `json:"runs"`
	// Every is how often the run writes its heartbeat.
	Every time.Duration `json:"every"`
}

// Position is a ledger event's position.
type Position struct {
	Ledger int64 `json:"ledger"`
	Entry  int64 `json:"entry"`
	Batch  int64 `json:"batch"`
}

// FusedUnfinished reports whether r is a fused backfill whose run on a
// CLI's machine has not finished.
func (r *Record) FusedUnfinished() bool {
	return r.State == StateRunning && r.Engine == "fused" && r.Fused != nil && !r.Fused.Done
}

// ClusterUnfinished reports whether r is a backfill whose fused run on the
// cluster (its runner) has not finished.
func (r *Record) ClusterUnfinished() bool {
	return r.State == StateRunning && r.Engine == "cluster" && (r.Fused == nil || !r.Fused.Done)
}

// FusedDone reports whether r is a running backfill whose fused run, on a
// CLI's machine or on the cluster, is done: its copy is deployed from
// there, or is to be.
func (r *Record) FusedDone() bool {
	return r.State == StateRunning && (r.Engine == "fused" || r.Engine == "cluster") && r.Fused != nil && r.Fused.Done
}

// FusedStalled reports whether r's fused run has not finished and missed
// heartbeats for five of its intervals (at least two seconds): the CLI
// that ran it died, and another may resume it.
func (r *Record) FusedStalled(now time.Time) bool {
	return r.FusedUnfinished() && now.Sub(r.Fused.Heartbeat) > max(5*r.Fused.Every, 2*time.Second)
}

// Unfinished reports whether the backfill still needs a --watch or an
// --abort (running or switching): a second backfill of its view is refused.
func (r *Record) Unfinished() bool { return unfinished(r.State) }

// Path is the backfill's whole path to its table, upstream first: the
// stages it shares, then its own.
func (r *Record) Path() []*manifest.Stage {
	return StagesOf(append(slices.Clone(r.Shares), r.Stages...))
}

// MayCarry reports whether the backfill's stages may be what fills its
// view's active table: it switched, or is switching (the registry says
// whether its table is the active one).
func (r *Record) MayCarry() bool { return r.State == StateSwitching || r.State == StateSwitched }

func createCQL(keyspace string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  view_name text,
  table_name text,
  state text,
  record text,
  PRIMARY KEY ((view_name), table_name))`, cqlname.Table(keyspace, Table))
}

// Store reads and writes the records of one keyspace. A record is kept as
// JSON next to its state: it is read whole, and only by Foldline.
type Store struct {
	CQL      *gocql.Session
	Keyspace string
}

// Ensure creates the table when absent.
func (s Store) Ensure(ctx context.Context) error {
	if err := s.CQL.Query(createCQL(s.Keyspace)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating backfill table %s.%s: %w", s.Keyspace, Table, err)
	}
	return nil
}

// Put writes r over the record Claim made of it. It is a lightweight
// transaction like the claim: Cassandra orders a plain write and a Paxos
// write of the same row by their timestamps, not by when they happened, so
// a plain update may be shadowed by the claim it follows (a give-way left
// "running" made the racing-claims test fail once in CI). Every write of
// this table goes through Paxos, so the last one made is the one read.
func (s Store) Put(ctx context.Context, r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding backfill of %s: %w", r.View, err)
	}
	q := fmt.Sprintf(`UPDATE %s SET state = ?, record = ? WHERE view_name = ? AND table_name = ? IF EXISTS`, cqlname.Table(s.Keyspace, Table))
	applied, err := s.CQL.Query(q, r.State, string(data), r.View, r.Table).WithContext(ctx).MapScanCAS(map[string]any{})
	if err != nil {
		return fmt.Errorf("recording backfill of %s into %s: %w", r.View, r.Table, err)
	}
	if !applied {
		return fmt.Errorf("recording backfill of %s into %s: its record in %s.%s is gone (dropped by destroy --tables or --purge?)", r.View, r.Table, s.Keyspace, Table)
	}
	r.raw = string(data)
	return nil
}

// Replace writes r only if the stored record is still the one r was last
// read or written as (a compare-and-set of the whole record): a fused run
// writes its checkpoints so, and so does the CLI that resumes it, so that
// of two CLIs only one runs it, and a run whose record changed under it
// (an abort, a resume by another CLI) learns it at its next checkpoint.
func (s Store) Replace(ctx context.Context, r *Record) (bool, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("encoding backfill of %s: %w", r.View, err)
	}
	q := fmt.Sprintf(`UPDATE %s SET state = ?, record = ? WHERE view_name = ? AND table_name = ? IF record = ?`, cqlname.Table(s.Keyspace, Table))
	applied, err := s.CQL.Query(q, r.State, string(data), r.View, r.Table, r.raw).WithContext(ctx).MapScanCAS(map[string]any{})
	if err != nil {
		return false, fmt.Errorf("recording backfill of %s into %s: %w", r.View, r.Table, err)
	}
	if applied {
		r.raw = string(data)
	}
	return applied, nil
}

// Transition writes r, whose State is the new state, only if the record is
// in state from at that moment (a lightweight transaction like Put); else
// it writes nothing and returns the state the record has (a concurrent
// --abort or --watch moved it).
func (s Store) Transition(ctx context.Context, r *Record, from string) (applied bool, current string, err error) {
	data, err := json.Marshal(r)
	if err != nil {
		return false, "", fmt.Errorf("encoding backfill of %s: %w", r.View, err)
	}
	q := fmt.Sprintf(`UPDATE %s SET state = ?, record = ? WHERE view_name = ? AND table_name = ? IF state = ?`, cqlname.Table(s.Keyspace, Table))
	existing := map[string]any{}
	applied, err = s.CQL.Query(q, r.State, string(data), r.View, r.Table, from).WithContext(ctx).MapScanCAS(existing)
	if err != nil {
		return false, "", fmt.Errorf("recording backfill of %s into %s as %s: %w", r.View, r.Table, r.State, err)
	}
	if applied {
		r.raw = string(data)
		return true, r.State, nil
	}
	current, _ = existing["state"].(string)
	return false, current, nil
}

// Claim records r, a running backfill about to deploy, only if no other
// backfill of r.View is unfinished (running or switching); otherwise it records nothing of r's and returns
// the running one. Two starts racing each other cannot both win: the row of
// r's table is claimed with a lightweight transaction (Paxos), so of two
// starts that picked the same table one fails; a start that picked another
// table and then finds another running claim of the view gives way, marking
// its own claim aborted. Two racing claims may both give way; never do both
// win.
func (s Store) Claim(ctx context.Context, r *Record) (running *Record, err error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding backfill of %s: %w", r.View, err)
	}
	claimed, err := s.claimRow(ctx, r, string(data))
	if err != nil || claimed != nil {
		return claimed, err
	}
	r.raw = string(data)
	// A serial read: it completes any claim still in flight before it
	// reads, so a claim that has been made is seen.
	records, err := s.list(ctx, r.View, true)
	if err != nil {
		return nil, err
	}
	for _, other := range records {
		if other.Unfinished() && other.Table != r.Table {
			lost := *r
			lost.State, lost.Error = StateAborted, "refused: a backfill into "+other.Table+" started at the same time"
			lost.FinishedAt = time.Now().UTC()
			if err := s.Put(ctx, &lost); err != nil {
				return nil, err
			}
			return other, nil
		}
	}
	return nil, nil
}

// claimRow writes r's row if it is absent or holds a finished backfill
// (a table version reused after an abort), as one compare-and-set; it
// returns the running record that holds the row instead.
func (s Store) claimRow(ctx context.Context, r *Record, data string) (*Record, error) {
	insert := fmt.Sprintf(`INSERT INTO %s (view_name, table_name, state, record) VALUES (?, ?, ?, ?) IF NOT EXISTS`, cqlname.Table(s.Keyspace, Table))
	existing := map[string]any{}
	applied, err := s.CQL.Query(insert, r.View, r.Table, r.State, data).WithContext(ctx).MapScanCAS(existing)
	if err != nil {
		return nil, fmt.Errorf("claiming %s for a backfill of %s: %w", r.Table, r.View, err)
	}
	if applied {
		return nil, nil
	}
	state, _ := existing["state"].(string)
	prior, _ := existing["record"].(string)
	if !unfinished(state) {
		update := fmt.Sprintf(`UPDATE %s SET state = ?, record = ? WHERE view_name = ? AND table_name = ? IF state = ?`, cqlname.Table(s.Keyspace, Table))
		current := map[string]any{}
		applied, err := s.CQL.Query(update, r.State, data, r.View, r.Table, state).WithContext(ctx).MapScanCAS(current)
		if err != nil {
			return nil, fmt.Errorf("claiming %s for a backfill of %s: %w", r.Table, r.View, err)
		}
		if applied {
			return nil, nil
		}
		prior, _ = current["record"].(string)
	}
	var holder Record
	if err := json.Unmarshal([]byte(prior), &holder); err != nil {
		return nil, fmt.Errorf("decoding the backfill that holds %s.%s: %w", s.Keyspace, r.Table, err)
	}
	return &holder, nil
}

// TableVersion is N of a table named <view>_v<N>; ok is false for a name
// without that suffix.
func TableVersion(table string) (n int, ok bool) {
	i := strings.LastIndex(table, "_v")
	digits := table[i+2:]
	if i < 0 || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// List returns the records of view, or of every view for "". A keyspace
// without the table has none.
func (s Store) List(ctx context.Context, view string) ([]*Record, error) {
	return s.list(ctx, view, false)
}

// list is List, at SERIAL consistency when serial (which needs a view: one
// partition).
func (s Store) list(ctx context.Context, view string, serial bool) ([]*Record, error) {
	q := fmt.Sprintf(`SELECT record FROM %s`, cqlname.Table(s.Keyspace, Table))
	var args []any
	if view != "" {
		q += ` WHERE view_name = ?`
		args = append(args, view)
	}
	query := s.CQL.Query(q, args...).WithContext(ctx)
	if serial {
		query = query.Consistency(gocql.Consistency(gocql.Serial)) // the protocol takes SERIAL as a read consistency
	}
	iter := query.Iter()
	var records []*Record
	var data string
	for iter.Scan(&data) {
		var r Record
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return nil, fmt.Errorf("decoding a backfill record of %s.%s: %w", s.Keyspace, Table, err)
		}
		r.raw = data
		records = append(records, &r)
	}
	if err := iter.Close(); err != nil {
		var reqErr gocql.RequestError
		if errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeInvalid {
			return nil, nil // no table yet: no backfill ever ran here
		}
		return nil, fmt.Errorf("reading backfills of %s.%s: %w", s.Keyspace, Table, err)
	}
	return records, nil
}

// Unfinished returns view's unfinished backfill (running or switching),
// nil if none.
func (s Store) Unfinished(ctx context.Context, view string) (*Record, error) {
	records, err := s.List(ctx, view)
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		if r.Unfinished() {
			return r, nil
		}
	}
	return nil, nil
}

// ByTable returns the record of the backfill that built table, nil if none
// did (deploy did).
func (s Store) ByTable(ctx context.Context, view, table string) (*Record, error) {
	records, err := s.List(ctx, view)
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		if r.Table == table {
			return r, nil
		}
	}
	return nil, nil
}

// Diff is how the new table of a backfill differs from the old one, over
// the view's key and value columns (the sink's bookkeeping columns left
// out, deleted rows counted as absent).
type Diff struct {
	OldRows   int `json:"oldRows"`
	NewRows   int `json:"newRows"`
	OnlyOld   int `json:"onlyOld"`
	OnlyNew   int `json:"onlyNew"`
	Differing int `json:"differing"`
	// Examples shows a few differences, one per line.
	Examples []string `json:"examples,omitempty"`
}

// Identical reports whether the tables hold the same rows.
func (d *Diff) Identical() bool { return d.OnlyOld == 0 && d.OnlyNew == 0 && d.Differing == 0 }

// String is the summary line.
func (d *Diff) String() string {
	if d.Identical() {
		return fmt.Sprintf("identical: %d rows in both", d.NewRows)
	}
	return fmt.Sprintf("%d rows only in the old table, %d only in the new, %d differing (old %d rows, new %d)",
		d.OnlyOld, d.OnlyNew, d.Differing, d.OldRows, d.NewRows)
}
