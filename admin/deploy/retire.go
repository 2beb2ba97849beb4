package deploy

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
)

// Cluster is what the retirement of expired paths works on: the manifests
// and the connections to the cluster.
type Cluster struct {
	Set    *manifest.Set
	Graph  *manifest.Graph
	Pulsar *pulsarx.Clients
	CQL    *gocql.Session
}

// Retired is one table version whose path RetireExpired stopped.
type Retired struct {
	View  string `json:"view"`
	Table string `json:"table"`
	// Removed lists what was deleted (functions, subscriptions, packages).
	Removed []string `json:"removed"`
}

// PathOf returns the stages that fill table, a version of view: the copy
// of the backfill that built it (a switching or switched one), else the
// manifests' path, with the sink named for table when the manifests name
// the sink after their own version.
func PathOf(graph *manifest.Graph, records []*backfillrecord.Record, view, table string) []*manifest.Stage {
	for _, r := range records {
		if r.View == view && r.Table == table && (r.MayCarry() || r.Unfinished()) {
			return r.Path()
		}
	}
	path := graph.PathTo(view)
	if len(path) == 0 {
		return nil
	}
	sink := path[len(path)-1]
	if sink.View != nil && sink.View.Table() != table && sink.Name == sink.View.Table()+"-sink" {
		renamed := *sink
		renamed.Name, renamed.SubName = table+"-sink", table+"-sink"
		path = append(path[:len(path)-1:len(path)-1], &renamed)
	}
	return path
}

// RetireExpired stops the table versions whose rollback grace is over:
// every retired version whose history says its path still follows the
// ledger past the grace its deactivation recorded (or, for one switched
// away from before Foldline recorded it, at once), has the functions of its
// path that no other path still needs (an active table's, one still in
// its grace, a running backfill's) deleted, and its history records that
// it stopped and the ledger positions it had got to. The tables stay (a
// backfill drops them after --keep-old). It is run by deploy, backfill and
// foldline views gc: there is no daemon.
func RetireExpired(ctx context.Context, c Cluster, progress io.Writer, now time.Time) ([]Retired, error) {
	ks := c.Set.Tenant.Keyspace
	exists, err := registry.Exists(ctx, c.CQL, ks)
	if err != nil || !exists {
		return nil, err
	}
	if err := registry.Ensure(ctx, c.CQL, ks); err != nil {
		return nil, err
	}
	records, err := backfillrecord.Store{CQL: c.CQL, Keyspace: ks}.List(ctx, "")
	if err != nil {
		return nil, err
	}
	entries, err := registry.List(ctx, c.CQL, ks)
	if err != nil {
		return nil, err
	}
	type candidate struct {
		view, table string
		stages      []*manifest.Stage
		known       bool
	}
	needed := map[string]bool{}
	need := func(stages []*manifest.Stage) {
		for _, st := range stages {
			needed[st.FullName()] = true
		}
	}
	for _, r := range records {
		if r.Unfinished() {
			need(r.Path())
		}
	}
	var expired []candidate
	for _, e := range entries {
		history, err := registry.History(ctx, c.CQL, ks, e.View)
		if err != nil {
			return nil, err
		}
		for _, v := range e.Versions {
			path := PathOf(c.Graph, records, e.View, v.Table)
			if v.Table == e.ActiveTable {
				need(path)
				continue
			}
			if v.State != registry.StateRetired {
				continue
			}
			events := history[v.Table]
			following, known := registry.Following(events)
			if known && !following {
				continue // stopped already
			}
			if d, ok := registry.LastDeactivation(events); ok && now.Before(d.Until) {
				need(path) // in its grace: activating it again gives an up-to-date table
				continue
			}
			expired = append(expired, candidate{view: e.View, table: v.Table, stages: path, known: known})
		}
	}
	var out []Retired
	for _, cand := range expired {
		var retire []*manifest.Stage
		for _, st := range cand.stages {
			if !needed[st.FullName()] {
				retire = append(retire, st)
			}
		}
		removed, err := DeleteStages(ctx, c.Pulsar, retire, progress)
		if err != nil {
			return out, fmt.Errorf("retiring the functions of %s.%s after its rollback grace: %w", ks, cand.table, err)
		}
		positions := map[string]string{}
		for _, st := range cand.stages {
			for _, in := range st.Inputs {
				if c.Graph.Ledger[in] {
					last, err := pulsarx.LastEntries(ctx, c.Pulsar, in)
					if err != nil {
						return out, err
					}
					maps.Copy(positions, last)
				}
			}
		}
		ev := registry.Event{At: now, Kind: registry.EventStopped, Positions: positions, Note: "its rollback grace is over: its functions that no other path needs were removed"}
		if !cand.known {
			ev.Note = "switched away from before Foldline recorded rollback graces: its functions were removed then, or now"
		}
		if err := registry.Record(ctx, c.CQL, ks, cand.view, cand.table, ev); err != nil {
			return out, err
		}
		if removed == nil {
			removed = []string{}
		}
		fmt.Fprintf(progress, "%s.%s stopped following the ledger: its rollback grace is over\n", ks, cand.table)
		out = append(out, Retired{View: cand.view, Table: cand.table, Removed: removed})
	}
	return out, nil
}

// RetireExpiredPaths is RetireExpired for the manifests and services of
// opts (foldline views gc).
func RetireExpiredPaths(ctx context.Context, opts Options, now time.Time) ([]Retired, error) {
	s, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return RetireExpired(ctx, Cluster{Set: s.set, Graph: s.graph, Pulsar: s.pulsar, CQL: s.cql}, opts.ErrOut, now)
}

// ActiveCarriers maps each stage of the manifests (by full name) whose
// work a backfill's copy does for a view's active table to that copy's
// function: the manifests' user-activity is run, for user_activity_v2, by
// user-activity-bf-user_activity_v2. A stage that still runs under its own
// name for some active table (a shared validate, a stage of a view deploy
// built) is left out: it runs as itself. status, ui and plan show the
// functions under the manifests' names through it.
func ActiveCarriers(ctx context.Context, cql *gocql.Session, set *manifest.Set, graph *manifest.Graph) (map[string]*manifest.Stage, error) {
	ks := set.Tenant.Keyspace
	out := map[string]*manifest.Stage{}
	exists, err := registry.Exists(ctx, cql, ks)
	if err != nil || !exists {
		return out, err
	}
	records, err := backfillrecord.Store{CQL: cql, Keyspace: ks}.List(ctx, "")
	if err != nil {
		return nil, err
	}
	itself := map[string]bool{} // manifest stages running under their own name for an active table
	copies := map[string]*manifest.Stage{}
	for _, v := range set.Views {
		entry, err := registry.Get(ctx, cql, ks, v.Name)
		if err != nil {
			return nil, err
		}
		if entry.ActiveTable == "" {
			continue
		}
		for _, st := range PathOf(graph, records, v.Name, entry.ActiveTable) {
			itself[st.FullName()] = true
		}
		var carrier *backfillrecord.Record
		for _, r := range records {
			if r.View == v.Name && r.Table == entry.ActiveTable && r.MayCarry() {
				carrier = r
			}
		}
		if carrier == nil {
			continue
		}
		byKey := map[string]*manifest.Stage{}
		for _, st := range backfillrecord.StagesOf(carrier.Stages) {
			byKey[stageKey(st)] = st
		}
		for _, st := range graph.PathTo(v.Name) {
			if c, ok := byKey[stageKey(st)]; ok && c.FullName() != st.FullName() {
				copies[st.FullName()] = c
			}
		}
	}
	for name, c := range copies {
		if !itself[name] {
			out[name] = c
		}
	}
	return out, nil
}
