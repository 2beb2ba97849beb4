package manifest_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// shopGraph is the DAG of the repository's shop manifests.
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

// forkedStage is what a forked stage must look like.
type forkedStage struct {
	name, sub, output, dlt string
	inputs                 []string
}

func TestForkPathRenamesEveryStageOfTheViewsPath(t *testing.T) {
	graph := shopGraph(t)
	const p = "persistent://shop/pipeline/"
	cases := []struct {
		name    string
		view    string
		version int
		want    []forkedStage
	}{
		{
			name: "shared validate gets its own copy and topic", view: "user_activity", version: 2,
			want: []forkedStage{
				{"dedup-bf-user_activity_v2", "dedup-bf-user_activity_v2", p + "distinct-bf-user_activity_v2", p + "dedup-dlq-bf-user_activity_v2", []string{"persistent://shop/ledger/events"}},
				{"validate-bf-user_activity_v2", "validate-bf-user_activity_v2", p + "valid-bf-user_activity_v2", p + "validate-dlq-bf-user_activity_v2", []string{p + "distinct-bf-user_activity_v2"}},
				{"user-activity-bf-user_activity_v2", "user-activity-bf-user_activity_v2", p + "user-activity-ops-bf-user_activity_v2", p + "user-activity-dlq-bf-user_activity_v2", []string{p + "valid-bf-user_activity_v2"}},
				{"user_activity_v2-sink", "user_activity_v2-sink", "", p + "user_activity-sink-dlq-bf-user_activity_v2", []string{p + "user-activity-ops-bf-user_activity_v2"}},
			},
		},
		{
			name: "a longer path, version kept", view: "product_sales", version: 1,
			want: []forkedStage{
				{"dedup-bf-product_sales_v1", "dedup-bf-product_sales_v1", p + "distinct-bf-product_sales_v1", p + "dedup-dlq-bf-product_sales_v1", []string{"persistent://shop/ledger/events"}},
				{"validate-bf-product_sales_v1", "validate-bf-product_sales_v1", p + "valid-bf-product_sales_v1", p + "validate-dlq-bf-product_sales_v1", []string{p + "distinct-bf-product_sales_v1"}},
				{"purchases-bf-product_sales_v1", "purchases-bf-product_sales_v1", p + "purchases-bf-product_sales_v1", p + "purchases-dlq-bf-product_sales_v1", []string{p + "valid-bf-product_sales_v1"}},
				{"product-sales-bf-product_sales_v1", "product-sales-bf-product_sales_v1", p + "product-sales-ops-bf-product_sales_v1", p + "product-sales-dlq-bf-product_sales_v1", []string{p + "purchases-bf-product_sales_v1"}},
				{"product_sales_v1-sink", "product_sales_v1-sink", "", p + "product_sales-sink-dlq-bf-product_sales_v1", []string{p + "product-sales-ops-bf-product_sales_v1"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := graph.PathTo(tc.view)
			before := make([]string, len(path))
			for i, st := range path {
				before[i] = st.Name + " " + st.Output
			}
			forked := manifest.ForkPath(path, tc.version)
			if len(forked) != len(tc.want) {
				t.Fatalf("forked %d stages, want %d", len(forked), len(tc.want))
			}
			for i, st := range forked {
				got := forkedStage{st.Name, st.SubName, st.Output, st.DeadLetterTopic(), st.Inputs}
				w := tc.want[i]
				if got.name != w.name || got.sub != w.sub || got.output != w.output || got.dlt != w.dlt || !slices.Equal(got.inputs, w.inputs) {
					t.Errorf("stage %d = %+v, want %+v", i, got, w)
				}
				if st.Function != nil && (st.Function.Config.Name != st.Name || st.Function.Config.Output != st.Output || !slices.Equal(st.Function.Config.Inputs, st.Inputs)) {
					t.Errorf("stage %s: its function config says %s reads %v writes %s", st.Name, st.Function.Config.Name, st.Function.Config.Inputs, st.Function.Config.Output)
				}
				// A copy catches up with bigger batches and queues than the
				// live path's, which keeps the runtime's defaults.
				if st.Function != nil {
					checkCatchUp(t, st.Name, st.Function.Config.UserConfig, path[i].Function.Config.UserConfig,
						map[string]any{"batchingMaxMessages": 5000, "receiverQueueSize": 10_000, "maxPendingMessages": 20_000, "memoryLimitMB": 400})
				}
				if st.View != nil {
					checkCatchUp(t, st.Name, st.View.Sink.UserConfig, path[i].View.Sink.UserConfig,
						map[string]any{"receiverQueueSize": 10_000, "memoryLimitMB": 400})
				}
			}
			if sink := forked[len(forked)-1].View; sink.Table() != tc.view+"_v"+string(rune('0'+tc.version)) {
				t.Errorf("sink writes %s", sink.Table())
			}
			for i, st := range path {
				if before[i] != st.Name+" "+st.Output {
					t.Errorf("ForkPath changed the live stage %s", before[i])
				}
			}
		})
	}
	if graph.PathTo("nope") != nil {
		t.Error("PathTo of an unknown view is not nil")
	}
}

// checkCatchUp checks that a copy's user config (got) sets the catch-up
// keys of want, which its live stage's (live) leaves unset.
func checkCatchUp(t *testing.T, stage string, got, live, want map[string]any) {
	t.Helper()
	for key, w := range want {
		if got[key] != w || live[key] != nil {
			t.Errorf("stage %s: %s %v (the live one %v), want %v (unset)", stage, key, got[key], live[key], w)
		}
	}
}

// A stage known only by name (as a backfill record keeps it) has no user
// config: asking for its dead-letter topic must not panic (a second
// backfill of a view whose table the first one built did).
func TestStageWithoutManifestHasNoDeadLetterTopic(t *testing.T) {
	st := &manifest.Stage{Kind: manifest.StageFunction, Name: "validate-bf-user_activity_v2"}
	if dlt := st.DeadLetterTopic(); dlt != "" {
		t.Errorf("dead-letter topic %q, want none", dlt)
	}
}

// A copy gets a bigger memory limit only where its function's pod
// (resources.ram) still holds 1.3 times it; a smaller pod keeps the live
// function's limit, and a limit of the function's own is never changed.
func TestForkPathKeepsTheMemoryLimitAPodHolds(t *testing.T) {
	graph := shopGraph(t)
	cases := []struct {
		name string
		ram  int64
		own  any
		want any
	}{
		{name: "no resources", want: 400},
		{name: "a pod that holds it", ram: 1 << 30, want: 400},
		{name: "a pod just big enough", ram: 520 << 20, want: 400},
		{name: "a pod too small for it", ram: 519 << 20, want: nil},
		{name: "a limit of its own", ram: 256 << 20, own: 100, want: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := graph.PathTo("user_activity")
			validate := *path[0].Function
			validate.Config.UserConfig = maps.Clone(validate.Config.UserConfig)
			if tc.ram > 0 {
				validate.Config.Resources = &utils.Resources{CPU: 1, RAM: tc.ram, Disk: 1 << 30}
			}
			if tc.own != nil {
				validate.Config.UserConfig["memoryLimitMB"] = tc.own
			}
			st := *path[0]
			st.Function = &validate
			path[0] = &st
			forked := manifest.ForkPath(path, 2)
			if got := forked[0].Function.Config.UserConfig["memoryLimitMB"]; got != tc.want {
				t.Errorf("the copy's memoryLimitMB is %v, want %v", got, tc.want)
			}
		})
	}
}

// TestForkPathSharingCopiesOnlyWhatChanged checks a backfill's copy that
// shares the unchanged stages upstream: they are left out, the first
// copied stage reads their output topic (the manifests', or the one a
// copy carrying them writes), and everything downstream is renamed.
func TestForkPathSharingCopiesOnlyWhatChanged(t *testing.T) {
	graph := shopGraph(t)
	const p = "persistent://shop/pipeline/"
	cases := []struct {
		name   string
		shared map[string]string
		want   []forkedStage
	}{
		{
			name: "dedup and validate shared", shared: map[string]string{"dedup": p + "distinct", "validate": p + "valid"},
			want: []forkedStage{
				{"purchases-bf-product_sales_v2", "purchases-bf-product_sales_v2", p + "purchases-bf-product_sales_v2", p + "purchases-dlq-bf-product_sales_v2", []string{p + "valid"}},
				{"product-sales-bf-product_sales_v2", "product-sales-bf-product_sales_v2", p + "product-sales-ops-bf-product_sales_v2", p + "product-sales-dlq-bf-product_sales_v2", []string{p + "purchases-bf-product_sales_v2"}},
				{"product_sales_v2-sink", "product_sales_v2-sink", "", p + "product_sales-sink-dlq-bf-product_sales_v2", []string{p + "product-sales-ops-bf-product_sales_v2"}},
			},
		},
		{
			name: "everything but the sink shared, purchases through a copy", shared: map[string]string{"dedup": p + "distinct", "validate": p + "valid", "purchases": p + "purchases-bf-product_sales_v1", "product-sales": p + "product-sales-ops-bf-product_sales_v1"},
			want: []forkedStage{
				{"product_sales_v2-sink", "product_sales_v2-sink", "", p + "product_sales-sink-dlq-bf-product_sales_v2", []string{p + "product-sales-ops-bf-product_sales_v1"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forked := manifest.ForkPathSharing(graph.PathTo("product_sales"), 2, tc.shared)
			if len(forked) != len(tc.want) {
				t.Fatalf("%d stages copied, want %d", len(forked), len(tc.want))
			}
			for i, st := range forked {
				w := tc.want[i]
				if st.Name != w.name || st.SubName != w.sub || st.Output != w.output || st.DeadLetterTopic() != w.dlt || !slices.Equal(st.Inputs, w.inputs) {
					t.Errorf("stage %d: %s sub %s output %s dlt %s inputs %v; want %+v", i, st.Name, st.SubName, st.Output, st.DeadLetterTopic(), st.Inputs, w)
				}
			}
		})
	}
}
