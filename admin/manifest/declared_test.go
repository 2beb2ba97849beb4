package manifest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

const (
	upView  = "views/user_purchases_7d.yaml"
	skuView = "views/sku_units_1d.yaml"
	sample  = "samples/shop-events.jsonl"
)

// TestDeclaredViewIsAStage: a view with a from section brings its own
// function into the DAG, configured as the shop's functions are, with the
// view's spec in its user config; it reads from.input and writes the
// view's sink input, so deploy, plan, status and backfill see it.
func TestDeclaredViewIsAStage(t *testing.T) {
	set, err := manifest.Load(testenv.ShopManifests(t))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	graph, problems := set.Graph()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	i := slices.IndexFunc(graph.Order, func(st *manifest.Stage) bool { return st.Name == "user_purchases_7d-declared" })
	if i < 0 {
		t.Fatalf("no stage user_purchases_7d-declared in %d stages", len(graph.Order))
	}
	st := graph.Order[i]
	f := st.Function
	if st.Kind != manifest.StageFunction || f == nil || f.Declared == nil || f.Declared.Name != "user_purchases_7d" {
		t.Fatalf("stage %+v: want a function declared by view user_purchases_7d", st)
	}
	c := f.Config
	for what, ok := range map[string]bool{
		"binary":            st.Binary == manifest.DeclaredBinary,
		"tenant, namespace": c.Tenant == "shop" && c.Namespace == "pipeline",
		"inputs":            slices.Equal(c.Inputs, []string{"persistent://shop/pipeline/valid"}),
		"output":            c.Output == "persistent://shop/pipeline/user_purchases_7d-ops",
		"subscription":      c.SubName == "user_purchases_7d-declared" && c.SubscriptionPosition == "Earliest",
		"key_shared":        c.UserConfig[manifest.UserConfigSubscriptionType] == "key_shared",
		"dead-letter topic": st.DeadLetterTopic() == "persistent://shop/pipeline/user_purchases_7d-declared-dlq",
		"one instance":      c.Parallelism == 1,
	} {
		if !ok {
			t.Errorf("%s: not as a shop function's: %+v", what, c)
		}
	}
	up := graph.Upstream(st)
	if len(up) != 1 || up[0].Name != "validate" {
		t.Errorf("upstream of %s: %v, want validate", st.Name, up)
	}
	text, _ := c.UserConfig[declared.UserConfigSpec].(string)
	spec, err := declared.ParseSpec(text)
	if err != nil {
		t.Fatalf("the spec in the user config: %v", err)
	}
	want := `{"view":"user_purchases_7d","filter":{"type":["purchase"]},"key":{"column":"user","type":"text","field":"user"},"columns":[` +
		`{"name":"purchases_7d","type":"bigint","aggregate":"count"},` +
		`{"name":"spent_cents_7d","type":"bigint","aggregate":"sum","value":"qty * price_cents"},` +
		`{"name":"purchases_1d","type":"bigint","aggregate":"count"}]}`
	if got, _ := spec.Encode(); got != want {
		t.Errorf("spec\n\t%s\nwant\n\t%s", got, want)
	}
	v, _ := set.ViewByName("user_purchases_7d")
	for _, col := range v.Schema().Columns {
		if col.Merge != "add" {
			t.Errorf("column %s merges by %q, want add (its aggregate's)", col.Name, col.Merge)
		}
	}
	// A backfill's copy of the path carries the declared function too.
	var forked []string
	for _, st := range manifest.ForkPath(graph.PathTo("sku_units_1d"), 2) {
		forked = append(forked, st.Name)
	}
	if want := []string{"dedup-bf-sku_units_1d_v2", "validate-bf-sku_units_1d_v2", "sku_units_1d-declared-bf-sku_units_1d_v2", "sku_units_1d_v2-sink"}; !slices.Equal(forked, want) {
		t.Errorf("backfill path %v, want %v", forked, want)
	}
}

// TestDeclaredViewProblems: every problem of a declared view is reported at
// the view's field, with the file and line, including the fields its
// events lack (read from its sample).
func TestDeclaredViewProblems(t *testing.T) {
	spent := "  - {name: spent_cents_7d, type: bigint, aggregate: sum, value: qty * price_cents,"
	withSpent := func(repl string) edit {
		return edit{upView, spent, strings.Replace(spent, "value: qty * price_cents", repl, 1)}
	}
	// withAvg adds a second column to sku_units_1d, avg_qty_1d, with the
	// given definition.
	units := "  - {name: units_1d, type: bigint, aggregate: sum, value: qty, window: 1d, description: units purchased over the last day}\n"
	withAvg := func(def string) edit {
		return edit{skuView, units, units + "  - {name: avg_qty_1d, " + strings.ReplaceAll(def, `\n`, "\n") + "}\n"}
	}
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name:  "a value's field no event has",
			edits: []edit{withSpent("value: qty * price_cent")},
			want:  []wantProblem{{upView, "name: spent_cents_7d", "columns[1].value", "field price_cent is in no purchase event of samples/shop-events.jsonl"}},
		},
		{
			name:  "a key field no event has",
			edits: []edit{{upView, "  key: user", "  key: usr"}},
			want:  []wantProblem{{upView, "key: usr", "from.key", "field usr is in no purchase event of samples/shop-events.jsonl"}},
		},
		{
			name:  "a field of another type",
			edits: []edit{withSpent("value: sku")},
			want:  []wantProblem{{upView, "name: spent_cents_7d", "columns[1].value", "field sku is a string, want an integer in 47 of the 47 purchase events of samples/shop-events.jsonl (the first at line 2)"}},
		},
		{
			name: "a field some events lack",
			edits: []edit{{sample, "", "{\"type\":\"page_view\",\"user\":\"u1\"}\n" +
				"{\"type\":\"purchase\",\"user\":\"u1\",\"sku\":\"s\",\"qty\":2,\"price_cents\":5}\n" +
				"{\"type\":\"purchase\",\"user\":\"u2\",\"sku\":\"s\",\"qty\":2}\n" +
				"{\"type\":\"purchase\",\"sku\":\"s\",\"qty\":\"2\"}\n"}},
			want: []wantProblem{
				{upView, "  key: user", "from.key", "field user is missing from 1 of the 3 purchase events of samples/shop-events.jsonl (the first at line 4): they would go to the dead-letter topic"},
				{upView, "name: spent_cents_7d", "columns[1].value", "field price_cents is missing from 1 of the 3 purchase events of samples/shop-events.jsonl (the first at line 3)"},
				{upView, "name: spent_cents_7d", "columns[1].value", "field qty is a string, want an integer in 1 of the 3 purchase events of samples/shop-events.jsonl (the first at line 4)"},
				{skuView, "name: units_1d", "columns[0].value", "field qty is a string, want an integer in 1 of the 3 purchase events"},
			},
		},
		{
			name:  "a filter field no event has",
			edits: []edit{{upView, "{type: purchase}", "{typ: purchase}"}},
			want:  []wantProblem{{upView, "{typ: purchase}", "from.filter.typ", "field typ is in no event of samples/shop-events.jsonl"}},
		},
		{
			name:  "a filter no event matches",
			edits: []edit{{upView, "{type: purchase}", "{type: [purchased, bought], qty: 2}"}},
			want:  []wantProblem{{upView, "filter:", "from.filter", "no event of samples/shop-events.jsonl matches it (300 events)"}},
		},
		{
			name:  "a filter value of no scalar type",
			edits: []edit{{upView, "{type: purchase}", "{type: purchase, qty: 1.5}"}},
			want:  []wantProblem{{upView, "filter:", "from.filter.qty", "1.5: want a string, an integer or a boolean"}},
		},
		{
			name:  "a value that does not parse",
			edits: []edit{withSpent("value: qty / price_cents")},
			want:  []wantProblem{{upView, "name: spent_cents_7d", "columns[1].value", `"qty / price_cents": want a field name, an integer, +, -, *, ( or ) at column 5, found "/"`}},
		},
		{
			name:  "an unknown aggregate",
			edits: []edit{{skuView, "aggregate: sum", "aggregate: average"}},
			want:  []wantProblem{{skuView, "aggregate: average", "columns[0].aggregate", `"average": want count, sum, min, max, last, avg`}},
		},
		{
			name:  "an avg",
			edits: []edit{withAvg("type: double, aggregate: avg, value: qty * price_cents, window: 1d")},
		},
		{
			name:  "an avg into an integer column",
			edits: []edit{withAvg("type: bigint, aggregate: avg, value: qty, window: 1d")},
			want:  []wantProblem{{skuView, "name: avg_qty_1d", "columns[1].type", "bigint: avg is a fraction, read as a double"}},
		},
		{
			name:  "an avg of a field no event has",
			edits: []edit{withAvg("type: double, aggregate: avg, value: qtty, window: 1d")},
			want:  []wantProblem{{skuView, "name: avg_qty_1d", "columns[1].value", "field qtty is in no purchase event of samples/shop-events.jsonl"}},
		},
		{
			name:  "an avg without a window in a windowed view",
			edits: []edit{withAvg("type: double, aggregate: avg, value: qty")},
			want:  []wantProblem{{skuView, "name: avg_qty_1d", "columns[1].window", "column avg_qty_1d has none"}},
		},
		{
			name:  "a column named as an avg's stored sum",
			edits: []edit{withAvg("type: double, aggregate: avg, value: qty, window: 1d}\n  - {name: avg_qty_1d_sum, type: bigint, aggregate: sum, value: qty, window: 1d")},
			want:  []wantProblem{{skuView, "name: avg_qty_1d_sum", "columns[2].name", `"avg_qty_1d_sum": column defined twice`}},
		},
		{
			name:  "no aggregate",
			edits: []edit{{skuView, "aggregate: sum, value", "value"}},
			want:  []wantProblem{{skuView, "name: units_1d", "columns[0].aggregate", "missing: say how events fold into column units_1d"}},
		},
		{
			name:  "a merge that disagrees with the aggregate",
			edits: []edit{{skuView, "aggregate: sum,", "aggregate: max, merge: add,"}},
			want:  []wantProblem{{skuView, "merge: add", "columns[0].merge", "add disagrees with aggregate max, which merges by max: leave merge out"}},
		},
		{
			name:  "a merge that agrees",
			edits: []edit{{skuView, "aggregate: sum,", "aggregate: sum, merge: add,"}},
		},
		{
			name:  "a count with a value",
			edits: []edit{{upView, "aggregate: count, window: 1d", "aggregate: count, value: qty, window: 1d"}},
			want:  []wantProblem{{upView, "name: purchases_1d", "columns[2].value", "qty: count adds 1 per event and takes no value"}},
		},
		{
			name:  "an aggregate on a view a pipeline function writes",
			edits: []edit{{"views/product_sales.yaml", "{name: units, type: bigint, merge: add,", "{name: units, type: bigint, merge: add, aggregate: sum, value: qty,"}},
			want: []wantProblem{
				{"views/product_sales.yaml", "name: units", "columns[0].aggregate", "only a declared view (one with from) folds events by itself"},
				{"views/product_sales.yaml", "name: units", "columns[0].value", "only a declared view (one with from) folds events by itself"},
			},
		},
		{
			name:  "two key columns",
			edits: []edit{{skuView, "key:\n  - {name: sku,", "key:\n  - {name: day, type: text}\n  - {name: sku,"}},
			want:  []wantProblem{{skuView, "{name: sku, type: text", "key[1]", "2 key columns: a declared view has one"}},
		},
		{
			name:  "a key type declared views do not take",
			edits: []edit{{skuView, "{name: sku, type: text,", "{name: sku, type: timestamp,"}},
			want:  []wantProblem{{skuView, "name: sku, type: timestamp", "key[0].type", `"timestamp": a declared view's key is text`}},
		},
		{
			name:  "no sample",
			edits: []edit{{skuView, "  sample: samples/shop-events.jsonl\n", ""}},
			want:  []wantProblem{{skuView, "from:", "from.sample", "missing: name a file of example events"}},
		},
		{
			name:  "a sample outside the manifest directory",
			edits: []edit{{skuView, "sample: samples/shop-events.jsonl", "sample: ../../etc/passwd"}},
			want:  []wantProblem{{skuView, "sample: ../../etc/passwd", "from.sample", `"../../etc/passwd": want a path inside the manifest directory`}},
		},
		{
			name:  "a sample that does not exist",
			edits: []edit{{skuView, "sample: samples/shop-events.jsonl", "sample: samples/none.jsonl"}},
			want:  []wantProblem{{skuView, "sample: samples/none.jsonl", "from.sample", "reading samples/none.jsonl"}},
		},
		{
			name:  "no input",
			edits: []edit{{skuView, "  input: persistent://shop/pipeline/valid\n", ""}},
			want: []wantProblem{
				{skuView, "from:", "from.input", "missing"},
			},
		},
		{
			name:  "another function writes the view's operations",
			edits: []edit{{"functions/product-sales.yaml", "output: persistent://shop/pipeline/product-sales-ops", "output: persistent://shop/pipeline/sku_units_1d-ops"}},
			want: []wantProblem{
				{skuView, "input: persistent://shop/pipeline/sku_units_1d-ops", "sink.input", "view sku_units_1d has 2 writers (product-sales, sku_units_1d-declared)"},
				{"views/product_sales.yaml", "input:", "sink.input", "nothing writes persistent://shop/pipeline/product-sales-ops"},
			},
		},
		{
			name:  "a declared view reading its own operations",
			edits: []edit{{skuView, "  input: persistent://shop/pipeline/valid", "  input: persistent://shop/pipeline/sku_units_1d-ops"}},
			want:  []wantProblem{{skuView, "input: persistent://shop/pipeline/sku_units_1d-ops", "from.input", "cycle: sku_units_1d-declared → sku_units_1d-declared"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}

// TestDeclaredAvgIsStoredAsSumAndCount: an avg column is two stored
// columns that add, its sum (of the column's type) and its count (bigint),
// over its window, and an average of the table definition that readers
// compute from them; the table has no column of its own name.
func TestDeclaredAvgIsStoredAsSumAndCount(t *testing.T) {
	dir := testenv.ShopManifests(t)
	units := "  - {name: units_1d, type: bigint, aggregate: sum, value: qty, window: 1d, description: units purchased over the last day}\n"
	applyEdit(t, dir, edit{skuView, units, units + "  - {name: avg_qty_1d, type: double, aggregate: avg, value: qty, window: 1d}\n"})
	set, err := manifest.Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	i := slices.IndexFunc(set.Views, func(v *manifest.View) bool { return v.Name == "sku_units_1d" })
	schema := set.Views[i].Schema()
	var got []string
	for _, c := range schema.Columns {
		got = append(got, fmt.Sprintf("%s %s %s %s", c.Name, c.Type, c.Merge, c.Window))
	}
	want := []string{"units_1d bigint add 1d", "avg_qty_1d_sum double add 1d", "avg_qty_1d_count bigint add 1d"}
	if !slices.Equal(got, want) {
		t.Errorf("stored columns %q, want %q", got, want)
	}
	if len(schema.Averages) != 1 || schema.Averages[0] != (cassandra.Average{Name: "avg_qty_1d", Sum: "avg_qty_1d_sum", Count: "avg_qty_1d_count"}) {
		t.Errorf("averages %+v, want avg_qty_1d of its sum and count", schema.Averages)
	}
	if err := schema.Validate(); err != nil {
		t.Errorf("the table definition: %v", err)
	}
}
