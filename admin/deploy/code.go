package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

// UserConfigConfigDigest is the key deploy adds to every function's user
// config next to UserConfigBinary: the digest of the part of the stage's
// config its code reads (configDigest). Together they are the stage's code
// (registry.StageCode), which the registry records for each table version.
const UserConfigConfigDigest = "foldline.config"

// ErrCodeChange is the error of a deploy that would change, in place, the
// code of a stage feeding a view's active table: the table would hold the
// old code's results for history and the new code's from now on, and equal
// the fold of the ledger under neither. foldline backfill builds a new
// version instead; deploy --in-place does it anyway, and the registry
// records it.
var ErrCodeChange = errors.New("changing a view's code in place")

// runtimeKeys are the user config keys that tune how a stage runs, not
// what it writes: they are left out of its config digest, so that scaling,
// batching or a dead-letter topic's name never counts as a code change.
var runtimeKeys = map[string]bool{
	pf.UserConfigReceiverQueueSize:         true,
	pf.UserConfigMaxPendingMessages:        true,
	pf.UserConfigCompression:               true,
	pf.UserConfigBatchingMaxMessages:       true,
	pf.UserConfigBatchingMaxSize:           true,
	pf.UserConfigBatchingMaxPublishDelayMs: true,
	pf.UserConfigLedgerEpochs:              true,
	pf.UserConfigAdminURL:                  true,
	pf.UserConfigGCPercent:                 true,
	pf.UserConfigMemoryLimitMB:             true,
	pf.UserConfigMaxProcs:                  true,
	pf.UserConfigOriginProperty:            true,
	pf.UserConfigCPUProfile:                true,
	pf.UserConfigOutputRouting:             true,
	pf.UserConfigUntilPublishTime:          true,
	pf.UserConfigUntilPosition:             true,
	pf.UserConfigUntilEventTime:            true,
	manifest.UserConfigDeadLetterTopic:     true,
	manifest.UserConfigMaxRetries:          true,
	manifest.UserConfigRetryBackoffMs:      true,
	manifest.UserConfigSubscriptionType:    true,
}

// configDigest digests what of a stage's config decides its outputs, the
// same for the manifests' stage and a backfill's copy of it: for a
// function, the topics it reads and writes (without a copy's suffix) and
// its user config less the runtime's settings (runtimeKeys) and deploy's
// own keys; for a sink, its input and its view's table definition (columns,
// types, merge rules, windows), less the table's name and keyspace, and
// the largest value it writes.
func configDigest(st *manifest.Stage) (string, error) {
	var subject any
	switch {
	case st.Function != nil:
		uc := map[string]any{}
		for k, v := range st.Function.Config.UserConfig {
			if !runtimeKeys[k] && !strings.HasPrefix(k, "foldline.") {
				uc[k] = v
			}
		}
		inputs := make([]string, len(st.Inputs))
		for i, in := range st.Inputs {
			inputs[i] = manifest.UnforkedTopic(in)
		}
		slices.Sort(inputs)
		subject = map[string]any{"inputs": inputs, "output": manifest.UnforkedTopic(st.Output), "userConfig": uc}
	case st.View != nil:
		schema := st.View.Schema()
		schema.Keyspace, schema.Table = "", ""
		subject = map[string]any{"input": manifest.UnforkedTopic(st.Inputs[0]), "schema": schema, "maxValueBytes": st.View.Sink.UserConfig["max_value_bytes"]}
	default:
		return "", fmt.Errorf("digesting the config of %s: a stage known only by name", st.FullName())
	}
	data, err := json.Marshal(subject) // map keys marshal sorted: stable
	if err != nil {
		return "", fmt.Errorf("digesting the config of %s: %w", st.FullName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// stageKey is registry.StageCode.Stage of st: the name of the manifests'
// stage it is or copies, registry.SinkStage for a sink.
func stageKey(st *manifest.Stage) string {
	if st.Kind == manifest.StageSink {
		return registry.SinkStage
	}
	return manifest.UnforkedName(st.Name)
}

// codeOf is a stage's code as deploy would run it.
func codeOf(st *manifest.Stage, bin gobuild.Binary) (registry.StageCode, error) {
	config, err := configDigest(st)
	if err != nil {
		return registry.StageCode{}, err
	}
	return registry.StageCode{Stage: stageKey(st), Function: st.FullName(), Binary: bin.SHA256, Config: config}, nil
}

// StageCodes builds the binaries of stages and returns their code (what a
// backfill records for the table its copy of a path fills).
func StageCodes(ctx context.Context, builder *gobuild.Builder, stages []*manifest.Stage) ([]registry.StageCode, error) {
	out := make([]registry.StageCode, 0, len(stages))
	// At once first, sharing one copy of the sources; each error is
	// reported below, with its stage.
	_ = builder.BuildAll(ctx, manifest.Binaries(stages))
	for _, st := range stages {
		bin, err := builder.Build(ctx, st.Binary)
		if err != nil {
			return nil, fmt.Errorf("building function %s: %w", st.Name, err)
		}
		code, err := codeOf(st, bin)
		if err != nil {
			return nil, err
		}
		out = append(out, code)
	}
	return out, nil
}

// CodeChange is a stage whose code the manifests change under the active
// table of one view or more: the table would no longer equal the fold of
// the ledger under one code.
type CodeChange struct {
	// Stage is the manifests' name of the stage ("sink" for a view's sink).
	Stage string `json:"stage"`
	// Function is the function that runs it now.
	Function string `json:"function"`
	// What changed: binary, config (either or both).
	What []string `json:"what"`
	// Views are the views whose active table it feeds.
	Views []ViewTable `json:"views"`
	// InPlace says deploy would update the running function (refused
	// without --in-place); false when a backfill's copy runs it and deploy
	// leaves it alone: only another backfill changes it.
	InPlace bool `json:"inPlace"`
	// From and To are the code before and after.
	From registry.StageCode `json:"from"`
	To   registry.StageCode `json:"to"`
}

// ViewTable is a view and its active table.
type ViewTable struct {
	View  string `json:"view"`
	Table string `json:"table"`
}

// Sentence says what changed and what it does to the views, in the words
// of plan: "user-activity's binary changed: user_activity_v2 would no
// longer equal the fold of the ledger under the new code".
func (c CodeChange) Sentence() string {
	tables := make([]string, len(c.Views))
	for i, v := range c.Views {
		tables[i] = v.Table
	}
	verb := "would no longer equal"
	if len(tables) > 1 {
		verb = "would no longer equal, each,"
	}
	name := c.Stage + "'s"
	if c.Stage == registry.SinkStage {
		name = "the sink's"
		if len(c.Views) == 1 {
			name = c.Views[0].View + "'s sink's"
		}
	}
	what := strings.Join(c.What, " and ")
	return fmt.Sprintf("%s %s changed: %s %s the fold of the ledger under the new code", name, what, joinAnd(tables), verb)
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// pathStage is one stage of the path to a view's active table, as plan
// sees it.
type pathStage struct {
	// Desired is the code the manifests ask for.
	Desired registry.StageCode
	// Current is the code that fills the table now (the registry's
	// history, or the running function's user config when the history
	// has none); Binary "" when unknown (not running, nothing recorded).
	Current registry.StageCode
	// Function is the function that runs it now.
	Function string
	// Managed says deploy updates Function (it is the manifests' stage);
	// false for a backfill's copy.
	Managed bool
}

// viewPath is the path to one view's active table.
type viewPath struct {
	View, Table string
	Stages      []pathStage
}

// codeChanges compares the code the manifests ask for with the code that
// fills each view's active table, and returns the stages that differ,
// once per function, with every view they feed, in the order first met.
// A stage whose current code is unknown is no change (nothing to compare
// with); nor is a config digest unknown on either side.
func codeChanges(paths []viewPath) []CodeChange {
	var out []CodeChange
	index := map[string]int{} // function → its change in out
	for _, p := range paths {
		for _, st := range p.Stages {
			if st.Current.Binary == "" {
				continue
			}
			var what []string
			if st.Desired.Binary != st.Current.Binary {
				what = append(what, "binary")
			}
			if st.Desired.Config != "" && st.Current.Config != "" && st.Desired.Config != st.Current.Config {
				what = append(what, "config")
			}
			if len(what) == 0 {
				continue
			}
			vt := ViewTable{View: p.View, Table: p.Table}
			if i, ok := index[st.Function]; ok {
				if !slices.Contains(out[i].Views, vt) {
					out[i].Views = append(out[i].Views, vt)
				}
				continue
			}
			index[st.Function] = len(out)
			out = append(out, CodeChange{Stage: st.Desired.Stage, Function: st.Function, What: what, Views: []ViewTable{vt},
				InPlace: st.Managed, From: st.Current, To: st.Desired})
		}
	}
	return out
}

// inPlace returns the changes deploy would make in place.
func inPlace(changes []CodeChange) []CodeChange {
	return slices.DeleteFunc(slices.Clone(changes), func(c CodeChange) bool { return !c.InPlace })
}

// codeChangeError refuses changes (those deploy would make in place)
// without --in-place, saying what to run instead.
func codeChangeError(changes []CodeChange) error {
	var lines, views []string
	for _, c := range changes {
		lines = append(lines, c.Sentence())
		for _, v := range c.Views {
			if !slices.Contains(views, v.View) {
				views = append(views, v.View)
			}
		}
	}
	slices.Sort(views)
	backfills := make([]string, len(views))
	for i, v := range views {
		backfills[i] = "foldline backfill " + v
	}
	return fmt.Errorf("%s; nothing was changed: build a new version of each view with the new code from the whole ledger (%s: it switches when caught up, and later deploys leave its copy alone), or pass --in-place to change the running functions anyway (the registry records where each view's table changed code: foldline views describe VIEW): %w: %w",
		strings.Join(lines, "; "), strings.Join(backfills, ", "), ErrCodeChange, exitcode.ErrUsage)
}

// codeFromConfig is the code a running function reports in its user
// config (Binary "" when deploy did not record it).
func codeFromConfig(key, function string, uc map[string]any) registry.StageCode {
	str := func(k string) string {
		s, _ := uc[k].(string)
		return s
	}
	return registry.StageCode{Stage: key, Function: function, Binary: str(UserConfigBinary), Config: str(UserConfigConfigDigest)}
}

// changedStages returns the stages of desired whose code differs from
// current's (by stage), with their new code: what an in-place change
// records.
func changedStages(current map[string]registry.StageCode, desired []registry.StageCode) []registry.StageCode {
	var out []registry.StageCode
	for _, d := range desired {
		c, ok := current[d.Stage]
		if !ok || c.Binary != d.Binary || (c.Config != "" && d.Config != "" && c.Config != d.Config) {
			out = append(out, d)
		}
	}
	return out
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Backfiller builds a new version of view from the whole ledger with the
// code of the manifests in opts and returns once the view reads it
// (foldline backfill VIEW, which imports this package: the command wires
// it in). sharedLater says that a later backfill of the same deploy shares
// stages this one copies: their output topics must then hold every ledger
// event's outputs, which a fused run (one process, no topic in between)
// does not leave.
type Backfiller func(ctx context.Context, opts Options, view string, sharedLater bool) error

// DeployWithBackfills is Deploy for code changes under views' active
// tables: instead of refusing them, it backfills each view they concern,
// one after the other (each switches when caught up, and later ones share
// what earlier ones built with the new code: sharedLater tells backfill
// which), and then deploys the rest of the plan, which changes no table's
// code in place any more.
func DeployWithBackfills(ctx context.Context, opts Options, backfill Backfiller) (*Result, error) {
	done := map[string]bool{}
	for {
		plan, err := MakePlan(ctx, opts)
		if err != nil {
			return nil, err
		}
		var next string
		for _, c := range inPlace(plan.CodeChanges) {
			for _, v := range c.Views {
				if !done[v.View] && (next == "" || v.View < next) {
					next = v.View
				}
			}
		}
		if next == "" {
			if changes := inPlace(plan.CodeChanges); len(changes) > 0 {
				// Backfilled, and still changed in place: say so rather
				// than loop.
				return &Result{Plan: plan}, codeChangeError(changes)
			}
			return Deploy(ctx, opts)
		}
		fmt.Fprintf(opts.ErrOut, "the code under view %s changed: building a new version with foldline backfill %s\n", next, next)
		if err := backfill(ctx, opts, next, sharedLater(inPlace(plan.CodeChanges), next, done)); err != nil {
			return nil, fmt.Errorf("backfilling %s with the new code (nothing else was deployed): %w", next, err)
		}
		done[next] = true
	}
}

// sharedLater reports whether a change among changes concerns view and a
// view not yet backfilled (done) besides: that view's backfill shares what
// view's copies. A stage both copy lies downstream of a change that
// concerns both, so the changes tell it.
func sharedLater(changes []CodeChange, view string, done map[string]bool) bool {
	for _, c := range changes {
		if !slices.ContainsFunc(c.Views, func(v ViewTable) bool { return v.View == view }) {
			continue
		}
		if slices.ContainsFunc(c.Views, func(v ViewTable) bool { return v.View != view && !done[v.View] }) {
			return true
		}
	}
	return false
}
