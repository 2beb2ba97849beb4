package backfill

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
)

// sharing returns the stages of view's path that a backfill need not copy
// (by manifest name, each mapped to the topic its copy reads instead) and
// the functions that run them. A stage is shared when every stage upstream
// of it on the path is, and some view's active table is filled by a
// function running it with the manifests' code (binary and config digests)
// — by the registry's history of that table, which records no in-place
// change of it — so that the function's output topic holds every ledger
// event's outputs under that one code (no fused or cluster backfill made
// the function: see partialOutputs); and when that topic's namespace
// retains everything (a copy reads it from the earliest). The sink is
// never shared (a new table needs its own). A replay (--until) and
// --copy-all share nothing: the replay's cutoff applies where the ledger
// is read.
func (e *env) sharing(ctx context.Context, opts Options, path []*manifest.Stage) (map[string]string, []*manifest.Stage, error) {
	if opts.Until != "" || opts.CopyAll || len(path) < 2 {
		return nil, nil, nil
	}
	ks := e.set.Tenant.Keyspace
	codes, err := deploy.StageCodes(ctx, opts.Builder, path)
	if err != nil {
		return nil, nil, err
	}
	records, err := e.store.List(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	entries, err := registry.List(ctx, e.cql, ks)
	if err != nil {
		return nil, nil, err
	}
	partial := partialOutputs(records)
	// clean maps a stage's manifest name to the functions that run it with
	// a known, unchanged code for an active table.
	type carrier struct {
		stage *manifest.Stage
		code  registry.StageCode
	}
	clean := map[string][]carrier{}
	for _, entry := range entries {
		if entry.ActiveTable == "" {
			continue
		}
		history, err := registry.History(ctx, e.cql, ks, entry.View)
		if err != nil {
			return nil, nil, err
		}
		events := history[entry.ActiveTable]
		code, ok := registry.CurrentCode(events)
		if !ok {
			continue // no history: what built it is not known
		}
		changed := map[string]bool{}
		for _, ev := range registry.InPlaceChanges(events) {
			for _, sc := range ev.Stages {
				changed[sc.Stage] = true
			}
		}
		for _, st := range deploy.PathOf(e.graph, records, entry.View, entry.ActiveTable) {
			if st.Kind == manifest.StageSink || st.Output == "" {
				continue
			}
			key := manifest.UnforkedName(st.Name)
			if sc, ok := code[key]; ok && !changed[key] && !partial[st.FullName()] {
				clean[key] = append(clean[key], carrier{stage: st, code: sc})
			}
		}
	}
	shared := map[string]string{}
	var shares []*manifest.Stage
	for i, st := range path {
		if st.View != nil {
			break
		}
		upstreamShared := true
		for _, up := range e.graph.Upstream(st) {
			if _, ok := shared[up.Name]; !ok {
				upstreamShared = false
			}
		}
		if !upstreamShared {
			continue
		}
		want := codes[i]
		// What the stage's copy would read: the ledger, or the topics of
		// the shared stages upstream. A function running the same code on
		// other topics (the manifests' user-activity on the old validate's
		// output, when the new validate is shared from a copy) is no
		// match: the config digest does not tell a copy's topics apart.
		inputs := make([]string, len(st.Inputs))
		for j, in := range st.Inputs {
			inputs[j] = in
			for _, up := range e.graph.Writers[in] {
				inputs[j] = shared[up.Name]
			}
		}
		slices.Sort(inputs)
		for _, c := range clean[st.Name] {
			if c.code.Binary != want.Binary || c.code.Config == "" || c.code.Config != want.Config || !e.retainsAll(c.stage.Output) {
				continue
			}
			if got := slices.Sorted(slices.Values(c.stage.Inputs)); !slices.Equal(got, inputs) {
				continue
			}
			shared[st.Name] = c.stage.Output
			shares = append(shares, c.stage)
			break
		}
	}
	return shared, shares, nil
}

// partialOutputs returns the functions (tenant/namespace/name) whose
// output topics lack the outputs of the ledger's first events: the copies
// made by fused or cluster backfills. Their run computed the path over the
// ledger in one process, no topic in between, and deployed the copy from
// the last event it read, so a backfill that read such a topic from the
// earliest would fold only the events since.
func partialOutputs(records []*backfillrecord.Record) map[string]bool {
	partial := map[string]bool{}
	for _, r := range records {
		if r.Fused == nil { // set from the start for the fused and cluster engines
			continue
		}
		for _, st := range r.Stages {
			partial[st.FullName()] = true
		}
	}
	return partial
}

// retainsAll reports whether topic's namespace keeps every message
// (retention -1/-1): a copy that shares the stage writing it reads it from
// the first event.
func (e *env) retainsAll(topic string) bool {
	rest, ok := strings.CutPrefix(topic, "persistent://")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] != e.set.Tenant.Name {
		return false
	}
	for _, ns := range e.set.Tenant.Namespaces {
		if ns.Name == parts[1] {
			return ns.Retention.TimeMinutes == -1 && ns.Retention.SizeMB == -1
		}
	}
	return false
}

// pathCodes returns the code of every stage of path (the manifests'), each
// with the function that runs it for the backfill: its copy, or the shared
// function — what the registry's history records for the new table.
func pathCodes(ctx context.Context, opts Options, path, forked, shares []*manifest.Stage) ([]registry.StageCode, error) {
	codes, err := deploy.StageCodes(ctx, opts.Builder, path)
	if err != nil {
		return nil, err
	}
	runs := map[string]string{}
	for _, st := range append(shares, forked...) {
		key := manifest.UnforkedName(st.Name)
		if st.Kind == manifest.StageSink {
			key = registry.SinkStage
		}
		runs[key] = st.FullName()
	}
	for i := range codes {
		if fn, ok := runs[codes[i].Stage]; ok {
			codes[i].Function = fn
		} else {
			return nil, fmt.Errorf("recording the code of the backfill: no function runs %s", codes[i].Stage)
		}
	}
	return codes, nil
}

// sources returns the topics the copy reads from outside itself: the
// ledger topics its first stages read, or the output topics of the stages
// it shares.
func sources(forked []*manifest.Stage) []string {
	written := map[string]bool{}
	for _, st := range forked {
		if st.Output != "" {
			written[st.Output] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, st := range forked {
		for _, in := range st.Inputs {
			if !written[in] && !seen[in] {
				seen[in] = true
				out = append(out, in)
			}
		}
	}
	return out
}

// refsOf describes stages for a record (nil for none).
func refsOf(stages []*manifest.Stage) []backfillrecord.StageRef {
	if len(stages) == 0 {
		return nil
	}
	return backfillrecord.RefsOf(stages)
}
