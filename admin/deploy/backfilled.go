package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
)

// backfilled is what backfills changed about the manifests' DAG: a view
// whose active table a backfill built is carried by that backfill's copy
// of its path (other names, subscriptions and topics), and the manifests'
// own stages that served only such views were retired by the switch.
type backfilled struct {
	// retired maps a manifest stage's full name to why deploy leaves it
	// alone.
	retired map[string]string
	// carrying are the backfills' stages that may run: those of running,
	// switching and switched backfills, and the runners of those running
	// on the cluster (destroy removes them too).
	carrying []*manifest.Stage
	// records are the keyspace's backfill records.
	records []*backfillrecord.Record
}

// carrierOf returns the record of the backfill whose copy of a path fills
// table, a version of view, nil when none does (deploy's own stages do).
func (b *backfilled) carrierOf(view, table string) *backfillrecord.Record {
	for _, r := range b.records {
		if r.View == view && r.Table == table && r.MayCarry() {
			return r
		}
	}
	return nil
}

// readBackfilled reads the registry and the backfill records of the set's
// keyspace. A keyspace without them has no backfills.
func readBackfilled(ctx context.Context, s *session) (*backfilled, error) {
	b := &backfilled{retired: map[string]string{}}
	ks := s.set.Tenant.Keyspace
	exists, err := registry.Exists(ctx, s.cql, ks)
	if err != nil || !exists {
		return b, err
	}
	records, err := backfillrecord.Store{CQL: s.cql, Keyspace: ks}.List(ctx, "")
	if err != nil {
		return nil, err
	}
	b.records = records
	for _, r := range records {
		if r.Unfinished() || r.MayCarry() {
			b.carrying = append(b.carrying, backfillrecord.StagesOf(r.Stages)...)
		}
		if runner := r.Runner(); runner != nil {
			b.carrying = append(b.carrying, runner)
		}
	}
	onManifestPath := map[string]bool{}
	rebuilt := map[string]string{} // manifest stage → a view a backfill rebuilt
	// A stage a backfill shares runs under its own name for the copy too:
	// deploy keeps managing it.
	for _, r := range records {
		if r.Unfinished() || r.MayCarry() {
			for _, sh := range r.Shares {
				onManifestPath[sh.FullName()] = true
			}
		}
	}
	for _, v := range s.set.Views {
		entry, err := registry.Get(ctx, s.cql, ks, v.Name)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(records, func(r *backfillrecord.Record) bool {
			return r.View == v.Name && r.Table == entry.ActiveTable && r.MayCarry()
		})
		for _, st := range s.graph.PathTo(v.Name) {
			if i < 0 {
				onManifestPath[st.FullName()] = true
				continue
			}
			runsAs := ""
			for _, c := range backfillrecord.StagesOf(records[i].Stages) {
				if stageKey(c) == stageKey(st) {
					runsAs = ", run there as " + c.FullName()
				}
			}
			rebuilt[st.FullName()] = fmt.Sprintf("%s (now %s%s)", v.Name, entry.ActiveTable, runsAs)
		}
	}
	// A view's first table is built by a backfill under the name deploy
	// would give its sink: deploy must not rewire it.
	for _, st := range b.carrying {
		if slices.ContainsFunc(s.graph.Order, func(m *manifest.Stage) bool { return m.FullName() == st.FullName() }) {
			b.retired[st.FullName()] = "a backfill runs under this name: left alone"
		}
	}
	for name, view := range rebuilt {
		if _, taken := b.retired[name]; !taken && !onManifestPath[name] {
			b.retired[name] = "serves only view " + view + ", which a backfill rebuilt and its copy of the path carries: left alone (change it with foldline backfill)"
		}
	}
	return b, nil
}

// withoutRetired returns the session with the retired stages taken out of
// the DAG deploy brings about, and a note for each.
func (b *backfilled) withoutRetired(s *session) (*session, []Change) {
	var notes []Change
	graph := *s.graph
	graph.Order = slices.DeleteFunc(slices.Clone(s.graph.Order), func(st *manifest.Stage) bool {
		why, ok := b.retired[st.FullName()]
		if ok {
			notes = append(notes, Change{Action: Note, Kind: "function", Name: st.FullName(), Details: []string{why}})
		}
		return ok
	})
	slices.SortFunc(notes, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	out := *s
	out.graph = &graph
	return &out, notes
}
