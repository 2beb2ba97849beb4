package deploy

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/testenv"
)

// shopGraph returns the shop manifests' DAG.
func shopGraph(t *testing.T) *manifest.Graph {
	t.Helper()
	set, err := manifest.Load(testenv.ShopManifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	graph, problems := set.Graph()
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	return graph
}

// TestConfigDigestCountsWhatTheCodeReads checks which edits of a stage
// change its config digest: what its code reads (its handler's user
// config, its topics, a view's columns and merge rules) does; its name,
// scaling, the runtime's settings and a backfill's renaming do not.
func TestConfigDigestCountsWhatTheCodeReads(t *testing.T) {
	graph := shopGraph(t)
	path := graph.PathTo("user_activity")
	function, sink := path[len(path)-2], path[len(path)-1]
	if function.Name != "user-activity" || sink.Kind != manifest.StageSink {
		t.Fatalf("unexpected path %v", path)
	}
	editFunction := func(edit func(st *manifest.Stage)) *manifest.Stage {
		c := *function
		f := *function.Function
		f.Config.UserConfig = maps.Clone(f.Config.UserConfig)
		c.Function = &f
		edit(&c)
		return &c
	}
	editSink := func(edit func(v *manifest.View)) *manifest.Stage {
		c := *sink
		v := *sink.View
		v.Columns = slices.Clone(v.Columns)
		v.Sink.UserConfig = maps.Clone(v.Sink.UserConfig)
		edit(&v)
		c.View = &v
		return &c
	}
	forked := manifest.ForkPath(path, 2)
	// The copies of the function and the sink: the path's last two stages.
	forkedFunction, forkedSink := forked[len(forked)-2], forked[len(forked)-1]
	cases := []struct {
		name     string
		stage    *manifest.Stage
		base     *manifest.Stage
		wantSame bool
	}{
		{"the same stage", function, function, true},
		{"a backfill's copy", forkedFunction, function, true},
		{"a copy's sink, another version", forkedSink, sink, true},
		{"more instances", editFunction(func(st *manifest.Stage) { st.Parallelism, st.Function.Config.Parallelism = 3, 3 }), function, true},
		{"the runtime's settings", editFunction(func(st *manifest.Stage) {
			st.Function.Config.UserConfig["receiverQueueSize"] = 10
			st.Function.Config.UserConfig["maxRetries"] = 9
			st.Function.Config.UserConfig["deadLetterTopic"] = "persistent://shop/pipeline/elsewhere"
			st.Function.Config.UserConfig[UserConfigBinary] = "other"
		}), function, true},
		{"a handler setting", editFunction(func(st *manifest.Stage) { st.Function.Config.UserConfig["currency"] = "EUR" }), function, false},
		{"another input", editFunction(func(st *manifest.Stage) { st.Inputs = []string{"persistent://shop/pipeline/other"} }), function, false},
		{"the sink's batching", editSink(func(v *manifest.View) { v.Sink.UserConfig["batch_size"] = 10 }), sink, true},
		{"a merge rule", editSink(func(v *manifest.View) { v.Columns[0].Merge = "max" }), sink, false},
		{"a column's description", editSink(func(v *manifest.View) { v.Columns[0].Description = "other words" }), sink, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := configDigest(tc.stage)
			if err != nil {
				t.Fatal(err)
			}
			base, err := configDigest(tc.base)
			if err != nil {
				t.Fatal(err)
			}
			if same := got == base; same != tc.wantSame {
				t.Errorf("digest same = %v, want %v", same, tc.wantSame)
			}
		})
	}
	if stageKey(forkedFunction) != "user-activity" || stageKey(forkedSink) != registry.SinkStage {
		t.Errorf("stage keys of the copy: %q, %q; want user-activity, sink", stageKey(forkedFunction), stageKey(forkedSink))
	}
}

// TestCodeChangesMarkEveryViewAStageFeeds is the plan's decision: which
// stages changed code under which views' active tables, and whether
// deploy would make the change in place.
func TestCodeChangesMarkEveryViewAStageFeeds(t *testing.T) {
	const p = "shop/pipeline/"
	code := func(stage, binary, config string) registry.StageCode {
		return registry.StageCode{Stage: stage, Binary: binary, Config: config}
	}
	stage := func(name string, desired, current registry.StageCode, managed bool) pathStage {
		return pathStage{Desired: desired, Current: current, Function: p + name, Managed: managed}
	}
	same := func(name, fn string) pathStage {
		c := code(name, "b-"+name, "c-"+name)
		return stage(fn, c, c, true)
	}
	validate, validateNew := code("validate", "b-validate", "c-validate"), code("validate", "b2-validate", "c-validate")
	ua, uaNew := code("user-activity", "b-user-activity", "c-user-activity"), code("user-activity", "b2-user-activity", "c-user-activity")
	uaConfig := code("user-activity", "b-user-activity", "c2-user-activity")
	userActivity := func(stages ...pathStage) viewPath {
		return viewPath{View: "user_activity", Table: "user_activity_v2", Stages: stages}
	}
	productSales := func(stages ...pathStage) viewPath {
		return viewPath{View: "product_sales", Table: "product_sales_v1", Stages: stages}
	}
	cases := []struct {
		name  string
		paths []viewPath
		want  []string // sentences
		// inPlace is how many changes deploy would make in place.
		inPlace int
	}{
		{
			name:  "nothing changed",
			paths: []viewPath{userActivity(same("validate", "validate"), same("user-activity", "user-activity"), same("sink", "user_activity_v2-sink"))},
		},
		{
			name:    "a binary under one view",
			paths:   []viewPath{userActivity(same("validate", "validate"), stage("user-activity", uaNew, ua, true), same("sink", "user_activity_v2-sink"))},
			want:    []string{"user-activity's binary changed: user_activity_v2 would no longer equal the fold of the ledger under the new code"},
			inPlace: 1,
		},
		{
			name:    "a config",
			paths:   []viewPath{userActivity(stage("user-activity", uaConfig, ua, true))},
			want:    []string{"user-activity's config changed: user_activity_v2 would no longer equal the fold of the ledger under the new code"},
			inPlace: 1,
		},
		{
			name: "a shared stage feeds both views",
			paths: []viewPath{
				userActivity(stage("validate", validateNew, validate, true), same("user-activity", "user-activity")),
				productSales(stage("validate", validateNew, validate, true), same("purchases", "purchases")),
			},
			want:    []string{"validate's binary changed: user_activity_v2 and product_sales_v1 would no longer equal, each, the fold of the ledger under the new code"},
			inPlace: 1,
		},
		{
			name:  "a backfill's copy runs it: noted, not in place",
			paths: []viewPath{userActivity(stage("user-activity-bf-user_activity_v2", uaNew, ua, false))},
			want:  []string{"user-activity's binary changed: user_activity_v2 would no longer equal the fold of the ledger under the new code"},
		},
		{
			name:  "nothing known of the running code",
			paths: []viewPath{userActivity(stage("user-activity", uaNew, registry.StageCode{}, true))},
		},
		{
			name:  "a config digest deployed before digests: the binary alone counts",
			paths: []viewPath{userActivity(stage("user-activity", uaConfig, code("user-activity", "b-user-activity", ""), true))},
		},
		{
			name:    "the sink",
			paths:   []viewPath{userActivity(stage("user_activity_v2-sink", code("sink", "b2", "c"), code("sink", "b1", "c"), true))},
			want:    []string{"user_activity's sink's binary changed: user_activity_v2 would no longer equal the fold of the ledger under the new code"},
			inPlace: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changes := codeChanges(tc.paths)
			var got []string
			for _, c := range changes {
				got = append(got, c.Sentence())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if n := len(inPlace(changes)); n != tc.inPlace {
				t.Errorf("%d changes in place, want %d", n, tc.inPlace)
			}
			if tc.inPlace > 0 {
				err := codeChangeError(inPlace(changes))
				if !errors.Is(err, ErrCodeChange) || !errors.Is(err, exitcode.ErrUsage) {
					t.Errorf("refusal %v: want ErrCodeChange and a usage error", err)
				}
				if !strings.Contains(err.Error(), "foldline backfill user_activity") || !strings.Contains(err.Error(), "--in-place") {
					t.Errorf("refusal %q: want it to name foldline backfill user_activity and --in-place", err)
				}
			}
		})
	}
}

// TestChangedStagesIsWhatAnInPlaceDeployRecords checks what deploy
// --in-place records: the stages whose code differs from the table's, a
// config digest unknown on the running side counting as unchanged.
func TestChangedStagesIsWhatAnInPlaceDeployRecords(t *testing.T) {
	current := map[string]registry.StageCode{
		"validate":      {Stage: "validate", Binary: "a", Config: "x"},
		"user-activity": {Stage: "user-activity", Binary: "b", Config: ""},
	}
	desired := []registry.StageCode{
		{Stage: "validate", Binary: "a", Config: "x"},
		{Stage: "user-activity", Binary: "b", Config: "y"},
		{Stage: "sink", Binary: "s", Config: "z"},
	}
	got := changedStages(current, desired)
	if len(got) != 1 || got[0].Stage != "sink" {
		t.Errorf("changed %+v, want the sink alone (new to the table's code)", got)
	}
	desired[0].Binary = "a2"
	if got := changedStages(current, desired); len(got) != 2 || got[0].Stage != "validate" {
		t.Errorf("changed %+v, want validate and the sink", got)
	}
}

// TestCurrentCodeFoldsTheHistory checks the code a table's history says
// fills it now.
func TestCurrentCodeFoldsTheHistory(t *testing.T) {
	built := registry.Event{Kind: registry.EventBuilt, Stages: []registry.StageCode{{Stage: "validate", Binary: "a"}, {Stage: "sink", Binary: "s"}}}
	inPlace := registry.Event{Kind: registry.EventInPlace, Stages: []registry.StageCode{{Stage: "validate", Binary: "a2"}}}
	activated := registry.Event{Kind: registry.EventActivated}
	if _, ok := registry.CurrentCode([]registry.Event{activated}); ok {
		t.Error("a history without code has code")
	}
	code, ok := registry.CurrentCode([]registry.Event{built, activated, inPlace})
	if !ok || code["validate"].Binary != "a2" || code["sink"].Binary != "s" {
		t.Errorf("code %+v, want validate a2 (in place), sink s", code)
	}
	if n := len(registry.InPlaceChanges([]registry.Event{built, inPlace, activated})); n != 1 {
		t.Errorf("%d in-place changes, want 1", n)
	}
}

// TestUnchangedReadsAnOlderDeploysFingerprint checks the baseline of a
// table deployed before config digests: a function whose fingerprint is
// the one an older deploy would compute for the manifests' config (without
// the keys added since) runs the manifests' config; one with another
// fingerprint is unknown.
func TestUnchangedReadsAnOlderDeploysFingerprint(t *testing.T) {
	st := shopGraph(t).PathTo("user_activity")[0] // validate, a ledger reader
	want := utils.FunctionConfig{Tenant: "shop", Namespace: "pipeline", Name: "validate", UserConfig: map[string]any{
		UserConfigBinary: "aaaa", UserConfigConfigDigest: "cccc", pf.UserConfigAdminURL: "http://127.0.0.1:8080", "maxRetries": 3}}
	fp, err := fingerprint(want)
	if err != nil {
		t.Fatal(err)
	}
	want.UserConfig[UserConfigFingerprint] = fp
	pl := &planner{plan: &Plan{functions: []desiredFunction{{Stage: st, Config: want}}}}
	older := utils.FunctionConfig{Tenant: "shop", Namespace: "pipeline", Name: "validate", UserConfig: map[string]any{UserConfigBinary: "aaaa", "maxRetries": 3}}
	if fp, err = fingerprint(older); err != nil {
		t.Fatal(err)
	}
	older.UserConfig[UserConfigFingerprint] = fp
	if !pl.unchanged(st, &older) {
		t.Error("a function an older deploy made from the same manifests reads as changed")
	}
	older.UserConfig[UserConfigFingerprint] = "other"
	if pl.unchanged(st, &older) {
		t.Error("a function with another fingerprint reads as unchanged")
	}
}

// TestSharedLaterTellsWhichBackfillIsShared: deploy --backfill runs a
// view's backfill with sharedLater when a change it copies concerns a view
// still to backfill, so that the later one can share its copies.
func TestSharedLaterTellsWhichBackfillIsShared(t *testing.T) {
	views := func(names ...string) []ViewTable {
		var out []ViewTable
		for _, n := range names {
			out = append(out, ViewTable{View: n, Table: n + "_v1"})
		}
		return out
	}
	changes := []CodeChange{
		{Stage: "validate", Views: views("product_sales", "user_activity")},
		{Stage: "sku-refunds", Views: views("sku_refunds")},
	}
	for _, c := range []struct {
		view string
		done map[string]bool
		want bool
	}{
		{"product_sales", nil, true},
		{"user_activity", map[string]bool{"product_sales": true}, false},
		{"user_activity", nil, true},
		{"sku_refunds", nil, false},
		{"orders", nil, false},
	} {
		if got := sharedLater(changes, c.view, c.done); got != c.want {
			t.Errorf("sharedLater(%s, done %v) = %v, want %v", c.view, c.done, got, c.want)
		}
	}
}
