package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// edit changes one file of a copy of the shop manifests: old → new, or,
// with old empty, writes new as the whole file.
type edit struct{ file, old, new string }

// wantProblem is a problem expected at the line of the file that contains
// at (in the edited copy).
type wantProblem struct {
	file, at, field, message string
}

func TestLoadReportsEveryProblemWithFileAndLine(t *testing.T) {
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name: "the shop manifests are valid",
		},
		{
			name:  "unknown field",
			edits: []edit{{"tenant.yaml", "keyspace: shop", "keyspace: shop\nkeyspaces: other"}},
			want:  []wantProblem{{"tenant.yaml", "keyspaces: other", "keyspaces", "unknown field"}},
		},
		{
			name:  "wrong type",
			edits: []edit{{"functions/validate.yaml", "parallelism: 1", "parallelism: two"}},
			want:  []wantProblem{{"functions/validate.yaml", "parallelism: two", "parallelism", `want a whole number, found the string "two"`}},
		},
		{
			name:  "every problem of several files at once",
			edits: []edit{{"tenant.yaml", "deduplication: true", "deduplication: yes please"}, {"views/product_sales.yaml", "version: 1", "version: [1]"}},
			want: []wantProblem{
				{"tenant.yaml", "deduplication: yes please", "namespaces[0].deduplication", "want a boolean"},
				{"views/product_sales.yaml", "version: [1]", "version", "want a whole number, found a list"},
			},
		},
		{
			name:  "topic read that nothing writes",
			edits: []edit{{"functions/user-activity.yaml", "  - persistent://shop/pipeline/valid", "  - persistent://shop/pipeline/nowhere"}},
			want:  []wantProblem{{"functions/user-activity.yaml", "pipeline/nowhere", "inputs[0]", "nothing writes persistent://shop/pipeline/nowhere"}},
		},
		{
			name:  "cycle",
			edits: []edit{{"functions/validate.yaml", "  - persistent://shop/pipeline/distinct", "  - persistent://shop/pipeline/distinct\n  - persistent://shop/pipeline/purchases"}},
			want:  []wantProblem{{"functions/purchases.yaml", "inputs:", "inputs", "cycle: purchases → validate → purchases"}},
		},
		{
			name:  "two writers of one view",
			edits: []edit{{"functions/product-sales.yaml", "output: persistent://shop/pipeline/product-sales-ops", "output: persistent://shop/pipeline/user-activity-ops"}},
			want: []wantProblem{
				{"views/user_activity.yaml", "input:", "sink.input", "view user_activity has 2 writers (user-activity, product-sales)"},
				{"views/product_sales.yaml", "input:", "sink.input", "nothing writes persistent://shop/pipeline/product-sales-ops"},
			},
		},
		{
			name:  "view column without merge rule",
			edits: []edit{{"views/user_activity.yaml", "{name: last_url, type: text, merge: set,", "{name: last_url, type: text,"}},
			want:  []wantProblem{{"views/user_activity.yaml", "name: last_url", "columns[5].merge", "column last_url has no merge rule"}},
		},
		{
			name:  "view column with an unknown CQL type",
			edits: []edit{{"views/product_sales.yaml", "{name: units, type: bigint, merge: add,", "{name: units, type: bignum, merge: add,"}},
			want:  []wantProblem{{"views/product_sales.yaml", "name: units", "columns[0].type", `"bignum": not one of`}},
		},
		{
			name:  "a function writes the ledger",
			edits: []edit{{"functions/purchases.yaml", "output: persistent://shop/pipeline/purchases", "output: persistent://shop/ledger/events"}},
			want: []wantProblem{
				{"functions/purchases.yaml", "output:", "output", "is a ledger topic: only ingest writes the ledger"},
				{"functions/validate.yaml", "inputs:", "inputs", "cycle: validate → purchases → dedup → validate"},
				{"functions/product-sales.yaml", "pipeline/purchases", "inputs[0]", "nothing writes persistent://shop/pipeline/purchases"},
			},
		},
		{
			name:  "topic in an undeclared namespace",
			edits: []edit{{"functions/validate.yaml", "output: persistent://shop/pipeline/valid", "output: persistent://shop/elsewhere/valid"}},
			// Reported with its consequences: the DAG is checked too, so the
			// stages that read the old topic learn that nothing writes it.
			want: []wantProblem{
				{"functions/enrich-purchases.yaml", "- persistent://shop/pipeline/valid", "inputs[0]", "nothing writes persistent://shop/pipeline/valid"},
				{"functions/orders.yaml", "- persistent://shop/pipeline/valid", "inputs[0]", "nothing writes persistent://shop/pipeline/valid"},
				{"functions/purchases.yaml", "- persistent://shop/pipeline/valid", "inputs[0]", "nothing writes persistent://shop/pipeline/valid"},
				{"functions/user-activity.yaml", "- persistent://shop/pipeline/valid", "inputs[0]", "nothing writes persistent://shop/pipeline/valid"},
				{"functions/validate.yaml", "output:", "output", "namespace elsewhere, which the tenant manifest"},
				{"views/sku_units_1d.yaml", "input: persistent://shop/pipeline/valid", "from.input", "nothing writes persistent://shop/pipeline/valid"},
				{"views/user_purchases_7d.yaml", "input: persistent://shop/pipeline/valid", "from.input", "nothing writes persistent://shop/pipeline/valid"},
			},
		},
		{
			name:  "retries the worker refuses for Go functions",
			edits: []edit{{"functions/purchases.yaml", "parallelism: 1", "parallelism: 1\nmaxMessageRetries: 3"}},
			want:  []wantProblem{{"functions/purchases.yaml", "maxMessageRetries", "maxMessageRetries", "set userConfig.maxRetries instead"}},
		},
		{
			name:  "several instances of a function on a key_shared subscription",
			edits: []edit{{"functions/user-activity.yaml", "parallelism: 1", "parallelism: 2"}},
			want:  []wantProblem{{"functions/user-activity.yaml", "parallelism: 2", "parallelism", "2 instances on a key_shared subscription interleave a ledger partition's keys"}},
		},
		{
			name: "several failover instances of a function on a topic that is not partitioned",
			edits: []edit{{"functions/user-activity.yaml", "parallelism: 1", "parallelism: 2"},
				{"functions/user-activity.yaml", "subscriptionType: key_shared", "subscriptionType: failover"}},
			want: []wantProblem{{"functions/user-activity.yaml", "- persistent://shop/pipeline/valid", "inputs[0]", "persistent://shop/pipeline/valid is not partitioned, so only 1 of the 2 instances"}},
		},
		{
			name: "more failover instances than the ledger has partitions",
			edits: []edit{{"tenant.yaml", "    partitions: 0", "    partitions: 2"},
				{"functions/dedup.yaml", "parallelism: 1", "parallelism: 3"},
				{"functions/dedup.yaml", "subscriptionType: key_shared", "subscriptionType: failover\n  state_cache: 0"}},
			want: []wantProblem{{"functions/dedup.yaml", "parallelism: 3", "parallelism", "3 instances for the 2 partitions of persistent://shop/ledger/events"}},
		},
		{
			name:  "an output routing the runtime does not know",
			edits: []edit{{"functions/validate.yaml", "  maxRetries: 3", "  maxRetries: 3\n  outputRouting: round-robin"}},
			want:  []wantProblem{{"functions/validate.yaml", "outputRouting: round-robin", "userConfig.outputRouting", "round-robin: want key or origin"}},
		},
		{
			name:  "an origin form the runtime does not know",
			edits: []edit{{"functions/validate.yaml", "  maxRetries: 3", "  maxRetries: 3\n  originProperty: both"}},
			want:  []wantProblem{{"functions/validate.yaml", "originProperty: both", "userConfig.originProperty", "both: want pair or single"}},
		},
		{
			name:  "a profile file on the worker's machine",
			edits: []edit{{"functions/validate.yaml", "  maxRetries: 3", "  maxRetries: 3\n  cpuProfile: /etc/cron.d/x"}},
			want:  []wantProblem{{"functions/validate.yaml", "cpuProfile: /etc/cron.d/x", "userConfig.cpuProfile", "not deployable"}},
		},
		{
			name: "key routing where a function reads a partitioned topic",
			edits: []edit{{"pipeline.yaml", "kind: Pipeline\n", "kind: Pipeline\ntopics:\n  - {name: persistent://shop/pipeline/valid, partitions: 2}\n"},
				{"functions/validate.yaml", "  maxRetries: 3", "  maxRetries: 3\n  outputRouting: key"}},
			want: []wantProblem{{"functions/validate.yaml", "outputRouting: key", "userConfig.outputRouting", "function user-activity reads the partitioned persistent://shop/pipeline/valid"}},
		},
		{
			name:  "a function read by functions batches by key",
			edits: []edit{{"functions/validate.yaml", "parallelism: 1", "parallelism: 1\nproducerConfig:\n  batchBuilder: KEY_BASED"}},
			want:  []wantProblem{{"functions/validate.yaml", "batchBuilder: KEY_BASED", "producerConfig.batchBuilder", "function user-activity reads persistent://shop/pipeline/valid"}},
		},
		{
			name: "several instances of a sink, the way that keeps each row's order",
			edits: []edit{{"views/user_activity.yaml", "  parallelism: 1\n  userConfig:", "  parallelism: 2\n  userConfig:\n    subscriptionType: key_shared\n    row_cache: 0"},
				{"functions/user-activity.yaml", "parallelism: 1", "parallelism: 1\nproducerConfig:\n  batchBuilder: KEY_BASED"}},
		},
		{
			name:  "several instances of a key_shared sink, its writer batching many rows together and its row cache on",
			edits: []edit{{"views/user_activity.yaml", "  parallelism: 1\n  userConfig:", "  parallelism: 2\n  userConfig:\n    subscriptionType: key_shared"}},
			want: []wantProblem{
				{"functions/user-activity.yaml", "tenant: shop", "producerConfig.batchBuilder", "view user_activity's sink runs 2 instances on a key_shared subscription of persistent://shop/pipeline/user-activity-ops"},
				{"views/user_activity.yaml", "userConfig:", "sink.userConfig.row_cache", "view user_activity's sink runs 2 instances: set 0"},
			},
		},
		{
			name:  "several instances of a failover sink",
			edits: []edit{{"views/user_activity.yaml", "  parallelism: 1\n  userConfig:", "  parallelism: 2\n  userConfig:\n    subscriptionType: failover\n    row_cache: 0"}},
			want:  []wantProblem{{"views/user_activity.yaml", "parallelism: 2", "sink.parallelism", "2 instances on a failover subscription: when an instance (re)joins"}},
		},
		{
			name:  "several instances of a sink on a shared subscription",
			edits: []edit{{"views/user_activity.yaml", "  parallelism: 1", "  parallelism: 3"}},
			want:  []wantProblem{{"views/user_activity.yaml", "parallelism: 3", "sink.parallelism", "3 instances on a shared subscription apply a row's operations out of order"}},
		},
		{
			name:  "YAML file that is neither a manifest nor named by a pipeline",
			edits: []edit{{"functions/stray.yaml", "", "name: stray\n"}},
			want:  []wantProblem{{"functions/stray.yaml", "name: stray", "kind", "name this file as a function config in a pipeline"}},
		},
		{
			name:  "pipeline names a missing config file",
			edits: []edit{{"pipeline.yaml", "config: functions/purchases.yaml", "config: functions/purchase.yaml"}},
			want: []wantProblem{
				{"pipeline.yaml", "functions/purchase.yaml", "functions[3].config", "purchase.yaml does not exist"},
				{"functions/purchases.yaml", "tenant: shop", "kind", "missing"},
				{"functions/product-sales.yaml", "pipeline/purchases", "inputs[0]", "nothing writes persistent://shop/pipeline/purchases"},
			},
		},
		{
			name: "offload settings out of range",
			edits: []edit{{"tenant.yaml", "  # Old segments go to tiered storage once a topic holds 1 GiB in BookKeeper.\n  - name: ledger",
				"  - name: ledger\n    offload: {thresholdBytes: -2, thresholdSeconds: -5, deletionLagMs: -1}\n  - name: ledger-old"}},
			want: []wantProblem{
				{"tenant.yaml", "thresholdBytes: -2", "namespaces[0].offload.thresholdBytes", "want -1 (off)"},
				{"tenant.yaml", "thresholdSeconds: -5", "namespaces[0].offload.thresholdSeconds", "want -1 (off)"},
				{"tenant.yaml", "deletionLagMs: -1", "namespaces[0].offload.deletionLagMs", "want 0 (at once)"},
			},
		},
		{
			name:  "unknown kind",
			edits: []edit{{"views/user_activity.yaml", "kind: View", "kind: Viewz"}},
			want:  []wantProblem{{"views/user_activity.yaml", "kind: Viewz", "kind", `"Viewz" is not one of Tenant, Pipeline, View`}},
		},
		{
			name:  "a view without a description",
			edits: []edit{{"views/product_sales.yaml", "description: >-", "summary: >-"}},
			want: []wantProblem{
				{"views/product_sales.yaml", "kind: View", "description", "required: say what the view holds"},
				{"views/product_sales.yaml", "summary: >-", "summary", "unknown field"},
			},
		},
		{
			name:  "another reader of a ledger whose events have ids",
			edits: []edit{{"functions/validate.yaml", "  - persistent://shop/pipeline/distinct", "  - persistent://shop/ledger/events"}},
			want:  []wantProblem{{"functions/validate.yaml", "- persistent://shop/ledger/events", "inputs[0]", "only the event-id deduplication"}},
		},
		{
			name:  "the event-id deduplication without an id field",
			edits: []edit{{"tenant.yaml", "eventId: id\n", ""}},
			want:  []wantProblem{{"pipeline.yaml", "dedup/cmd", "functions[0].binary", "name it in the tenant manifest (eventId)"}},
		},
		{
			name:  "the event-id deduplication not stateful",
			edits: []edit{{"pipeline.yaml", "    stateful: true\n", ""}},
			want:  []wantProblem{{"pipeline.yaml", "config: functions/dedup.yaml", "functions[0].stateful", "set stateful: true"}},
		},
		{
			name: "a stateful function with several instances that keeps keys",
			edits: []edit{{"tenant.yaml", "    partitions: 0", "    partitions: 2"},
				{"functions/dedup.yaml", "parallelism: 1", "parallelism: 2"},
				{"functions/dedup.yaml", "subscriptionType: key_shared", "subscriptionType: failover"}},
			want: []wantProblem{{"functions/dedup.yaml", "userConfig:", "userConfig.state_cache", "set 0"}},
		},
		{
			name:  "a stateful function naming its own table and id field",
			edits: []edit{{"functions/dedup.yaml", "  maxRetries: 3", "  maxRetries: 3\n  state_table: other\n  eventIdField: uuid\n  idBuckets: 0\n  consistency: MOST"}},
			want: []wantProblem{
				{"functions/dedup.yaml", "state_table: other", "userConfig.state_table", "set by deploy"},
				{"functions/dedup.yaml", "eventIdField: uuid", "userConfig.eventIdField", "deploy sets the tenant's eventId"},
				{"functions/dedup.yaml", "idBuckets: 0", "userConfig.idBuckets", "want a whole number from 1 to 4096"},
				{"functions/dedup.yaml", "consistency: MOST", "userConfig.consistency", "not a CQL consistency level"},
			},
		},
		{
			name:  "not YAML",
			edits: []edit{{"views/product_sales.yaml", "keyspace: shop\n", "keyspace: shop: x\n"}},
			want:  []wantProblem{{"views/product_sales.yaml", "keyspace: shop: x", "", "not valid YAML"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}

func TestProblemString(t *testing.T) {
	p := manifest.Problem{File: "manifests/tenant.yaml", Line: 7, Field: "namespaces[0].name", Message: "missing"}
	if got, want := p.String(), "manifests/tenant.yaml:7: namespaces[0].name: missing"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestRetargetMovesEveryTopicToTheNewTenant(t *testing.T) {
	set, err := manifest.Load(testenv.ShopManifests(t))
	if err != nil {
		t.Fatal(err)
	}
	set.Retarget("shop-test", "shop_test")
	if set.Tenant.Name != "shop-test" || set.Tenant.Keyspace != "shop_test" {
		t.Errorf("tenant %s keyspace %s, want shop-test and shop_test", set.Tenant.Name, set.Tenant.Keyspace)
	}
	graph, problems := set.Graph()
	if len(problems) > 0 {
		t.Fatalf("retargeted DAG: %v", problems)
	}
	for _, topic := range graph.Topics() {
		if !strings.HasPrefix(topic, "persistent://shop-test/") {
			t.Errorf("topic %s stayed outside the new tenant", topic)
		}
	}
	for _, st := range graph.Order {
		if st.Tenant != "shop-test" {
			t.Errorf("stage %s in tenant %s", st.Name, st.Tenant)
		}
	}
	for _, v := range set.Views {
		if v.Keyspace != "shop_test" {
			t.Errorf("view %s in keyspace %s", v.Name, v.Keyspace)
		}
	}
}

func TestGraphOrdersUpstreamFirst(t *testing.T) {
	set, err := manifest.Load(testenv.ShopManifests(t))
	if err != nil {
		t.Fatal(err)
	}
	graph, _ := set.Graph()
	position := map[*manifest.Stage]int{}
	for i, st := range graph.Order {
		position[st] = i
	}
	if len(graph.Order) != 17 {
		t.Fatalf("%d stages, want the 8 functions, the 3 declared views' functions and 6 sinks", len(graph.Order))
	}
	for _, st := range graph.Order {
		for _, up := range graph.Upstream(st) {
			if position[up] >= position[st] {
				t.Errorf("%s comes before its upstream %s", st.Name, up.Name)
			}
		}
	}
}

func applyEdit(t *testing.T, dir string, e edit) {
	t.Helper()
	path := filepath.Join(dir, e.file)
	if e.old == "" {
		if err := os.WriteFile(path, []byte(e.new), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), e.old) {
		t.Fatalf("%s does not contain %q", e.file, e.old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), e.old, e.new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lineOf returns the first line of file (after comments) containing s.
func lineOf(t *testing.T, file, s string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.Contains(line, s) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line containing %q", file, s)
	return 0
}

func hasProblem(problems manifest.Problems, file string, line int, field, message string) bool {
	for _, p := range problems {
		if p.File == file && p.Line == line && p.Field == field && strings.Contains(p.Message, message) {
			return true
		}
	}
	return false
}

// TestPartitionedDAGIsExact loads the shop laid out on 4 partitions, 4
// instances of every stage: lint accepts it, the functions that feed
// functions route by origin and the last ones by key, and a backfill's copy
// of a path keeps the partitions of every topic.
func TestPartitionedDAGIsExact(t *testing.T) {
	set, err := manifest.Load(testenv.PartitionedShopManifests(t, 4))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	graph, problems := set.Graph()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	byOrigin := map[string]bool{"dedup": true, "validate": true, "purchases": true, "orders": true, "enrich-purchases": true}
	for _, st := range graph.Order {
		if st.Function != nil && st.Function.Declared != nil {
			continue // a declared view's function runs 1 instance, into a topic of 1 partition
		}
		if st.Kind == manifest.StageFunction && st.OutputPartitions != 4 {
			t.Errorf("%s writes %s with %d partitions, want 4", st.Name, st.Output, st.OutputPartitions)
		}
		if st.RouteByOrigin != byOrigin[st.Name] {
			t.Errorf("%s: RouteByOrigin %v, want %v", st.Name, st.RouteByOrigin, byOrigin[st.Name])
		}
	}
	for _, st := range manifest.ForkPath(graph.PathTo("product_sales"), 2) {
		if st.Kind == manifest.StageFunction && (st.OutputPartitions != 4 || !strings.Contains(st.Output, "-bf-")) {
			t.Errorf("backfill copy %s writes %s with %d partitions, want a -bf- topic with 4", st.Name, st.Output, st.OutputPartitions)
		}
	}
}
