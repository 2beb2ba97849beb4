package deploy

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

// viewCode is what plan knows of the code of one view's active table.
type viewCode struct {
	viewPath
	// New: this deploy registers the view's first table, active.
	New bool
	// History is the table's history as the registry has it (nil: none).
	History []registry.Event
	// Ledgers are the ledger topics the path reads.
	Ledgers []string
}

// planCodeChanges compares, for every view with an active table (or one
// this deploy creates), the code of each stage on its path in the
// manifests with the code that fills the table now — the registry's
// history of the table, or, for a table without one, the running
// functions' user config — and notes every stage whose binary or config
// changed (Plan.CodeChanges). full is the manifests' whole DAG (the
// planner's may lack stages backfills retired), b what backfills did.
func (pl *planner) planCodeChanges(ctx context.Context, full *manifest.Graph, b *backfilled) error {
	ks := pl.set.Tenant.Keyspace
	managed := map[string]bool{}
	for _, st := range pl.graph.Order {
		managed[st.FullName()] = true
	}
	for _, v := range pl.set.Views {
		vc := viewCode{viewPath: viewPath{View: v.Name}}
		var history map[string][]registry.Event
		switch {
		case pl.newActive[v.Name]:
			vc.Table, vc.New = v.Table(), true
		case pl.registryExists:
			entry, err := registry.Get(ctx, pl.cql, ks, v.Name)
			if err != nil {
				return err
			}
			vc.Table = entry.ActiveTable
			if vc.Table != "" {
				if history, err = registry.History(ctx, pl.cql, ks, v.Name); err != nil {
					return err
				}
				vc.History = history[vc.Table]
			}
		}
		if vc.Table == "" {
			continue
		}
		recorded, hasCode := registry.CurrentCode(vc.History)
		carriers := map[string]*manifest.Stage{}
		if r := b.carrierOf(v.Name, vc.Table); r != nil {
			for _, st := range backfillrecord.StagesOf(r.Stages) {
				carriers[stageKey(st)] = st
			}
		}
		for _, st := range full.PathTo(v.Name) {
			bin, err := pl.builder.Build(ctx, st.Binary)
			if err != nil {
				return fmt.Errorf("building function %s: %w", st.Name, err)
			}
			desired, err := codeOf(st, bin)
			if err != nil {
				return err
			}
			carrier := st
			if c, ok := carriers[desired.Stage]; ok {
				carrier = c
			}
			ps := pathStage{Desired: desired, Function: carrier.FullName(), Managed: managed[carrier.FullName()]}
			switch {
			case vc.New:
			case hasCode:
				ps.Current = recorded[desired.Stage]
			case pl.deployed[carrier.FullName()] != nil:
				have := pl.deployed[carrier.FullName()]
				ps.Current = codeFromConfig(desired.Stage, carrier.FullName(), have.UserConfig)
				if ps.Current.Config == "" && pl.unchanged(carrier, have) {
					// Deployed before config digests, exactly as the
					// manifests now say (same fingerprint): the same config.
					ps.Current.Config = desired.Config
				}
			}
			vc.Stages = append(vc.Stages, ps)
			for _, in := range st.Inputs {
				if full.Ledger[in] && !containsString(vc.Ledgers, in) {
					vc.Ledgers = append(vc.Ledgers, in)
				}
			}
		}
		pl.views = append(pl.views, vc)
	}
	var paths []viewPath
	for _, vc := range pl.views {
		if !vc.New {
			paths = append(paths, vc.viewPath)
		}
	}
	pl.plan.CodeChanges = codeChanges(paths)
	for _, c := range pl.plan.CodeChanges {
		details := []string{c.Sentence()}
		if c.From.Binary != c.To.Binary {
			details = append(details, fmt.Sprintf("binary %s → %s", short(c.From.Binary), short(c.To.Binary)))
		}
		if c.From.Config != c.To.Config {
			details = append(details, fmt.Sprintf("config %s → %s", short(c.From.Config), short(c.To.Config)))
		}
		views := make([]string, len(c.Views))
		for i, v := range c.Views {
			views[i] = v.View
		}
		switch {
		case !c.InPlace:
			details = append(details, fmt.Sprintf("a backfill's copy runs it, which deploy leaves alone: foldline backfill %s builds a version with the new code", strings.Join(views, ", foldline backfill ")))
		case pl.inPlace:
			details = append(details, "--in-place: updated in place; the registry records the change and the ledger position where it took effect")
		default:
			details = append(details, fmt.Sprintf("deploy refuses this: foldline backfill %s builds a new version from the whole ledger with the new code (and switches when caught up), or deploy --in-place changes it anyway and the registry records it", strings.Join(views, ", foldline backfill ")))
		}
		pl.add(Change{Action: Note, Kind: "code", Name: c.Function, Details: details})
	}
	return nil
}

// unchanged reports whether have, the deployed function of stage st that
// records no config digest (deployed before there were), has the
// fingerprint (binary and whole config) the plan wants for st, as the
// deploy that made it computed fingerprints: without the keys added since
// (the config digest, the admin URL of ledger readers).
func (pl *planner) unchanged(st *manifest.Stage, have *utils.FunctionConfig) bool {
	for _, f := range pl.plan.functions {
		if f.Stage.FullName() != st.FullName() {
			continue
		}
		older := f.Config
		older.UserConfig = maps.Clone(f.Config.UserConfig)
		delete(older.UserConfig, UserConfigConfigDigest)
		if _, had := have.UserConfig[pf.UserConfigAdminURL]; !had {
			delete(older.UserConfig, pf.UserConfigAdminURL)
		}
		fp, err := fingerprint(older)
		return err == nil && fmt.Sprint(have.UserConfig[UserConfigFingerprint]) == fp
	}
	return false
}

// ledgerPositions returns the last entry of each ledger topic (partition)
// that the paths of views with in-place changes read: where the changes
// take effect.
func (pl *planner) ledgerPositions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	seen := map[string]bool{}
	for _, vc := range pl.views {
		for _, topic := range vc.Ledgers {
			if seen[topic] {
				continue
			}
			seen[topic] = true
			last, err := pulsarx.LastEntries(ctx, pl.pulsar, topic)
			if err != nil {
				return nil, err
			}
			maps.Copy(out, last)
		}
	}
	return out, nil
}

// recordCode writes, once the plan is applied, what it did to the code of
// each view's active table into the registry's history: the code that
// built a table this deploy created; the code found running under a table
// that had no history; and, with --in-place, the stages whose code changed
// and the ledger positions before the change (positions). Stages a
// backfill's copy runs are left out: deploy did not touch them.
func (pl *planner) recordCode(ctx context.Context, by string, positions map[string]string) error {
	ks := pl.set.Tenant.Keyspace
	for _, vc := range pl.views {
		var desired []registry.StageCode
		current := map[string]registry.StageCode{}
		for _, st := range vc.Stages {
			if !st.Managed {
				continue
			}
			desired = append(desired, st.Desired)
			if st.Current.Binary != "" {
				current[st.Desired.Stage] = st.Current
			}
		}
		if len(desired) == 0 {
			continue
		}
		record := func(ev registry.Event) error {
			return registry.Record(ctx, pl.cql, ks, vc.View, vc.Table, ev)
		}
		_, hasCode := registry.CurrentCode(vc.History)
		switch {
		case vc.New:
			if err := record(registry.Event{Kind: registry.EventBuilt, By: by, Stages: desired,
				Note: "deployed with the view: its functions read from the first event of their inputs"}); err != nil {
				return err
			}
			continue
		case !hasCode:
			// What ran before this deploy is the baseline; what it changed
			// follows as an in-place change.
			before := make([]registry.StageCode, 0, len(desired))
			for _, d := range desired {
				c, ok := current[d.Stage]
				if !ok { // not running before: created by this deploy as it is now
					c = d
					current[d.Stage] = d
				}
				before = append(before, c)
			}
			if err := record(registry.Event{Kind: registry.EventRecorded, By: by, Stages: before,
				Note: "the code found running when Foldline first recorded this table's code; what built its earlier rows is not known"}); err != nil {
				return err
			}
		}
		changed := changedStages(current, desired)
		if len(changed) == 0 {
			continue
		}
		if err := record(registry.Event{Kind: registry.EventInPlace, By: by, Stages: changed, Positions: positions}); err != nil {
			return err
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
