package manifest_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

func TestKeyspaceForIsOneToOne(t *testing.T) {
	cases := []struct {
		name, tenant, keyspace string
		ok                     bool
	}{
		{name: "plain", tenant: "shop", keyspace: "shop", ok: true},
		{name: "dash", tenant: "a-b", keyspace: "a_b", ok: true},
		{name: "test tenant", tenant: "e2e-fold-123456", keyspace: "e2e_fold_123456", ok: true},
		{name: "underscore would collide with a-b", tenant: "a_b"},
		{name: "dot would collide with a-b", tenant: "a.b"},
		{name: "upper case would collide with a-b", tenant: "A-B"},
		{name: "leading digit", tenant: "1shop"},
		{name: "leading dash", tenant: "-shop"},
		{name: "Cassandra's own keyspace", tenant: "system-auth"},
		{name: "Cassandra's own keyspace, plain", tenant: "system"},
		{name: "Foldline's own keyspace", tenant: "foldline"},
		{name: "named like Foldline's keyspace, longer", tenant: "foldline-shop", keyspace: "foldline_shop", ok: true},
		{name: "too long for a keyspace", tenant: "a" + strings.Repeat("b", 48)},
		{name: "quote", tenant: `a"b`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := manifest.CheckTenantName(tc.tenant)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckTenantName(%q) = %v, want ok %v", tc.tenant, err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, manifest.ErrTenantName) {
					t.Errorf("error %v is not ErrTenantName", err)
				}
				return
			}
			if got := manifest.KeyspaceFor(tc.tenant); got != tc.keyspace {
				t.Errorf("KeyspaceFor(%q) = %q, want %q", tc.tenant, got, tc.keyspace)
			}
		})
	}
	// Among accepted names, no two share a keyspace.
	seen := map[string]string{}
	for _, name := range []string{"a-b", "ab", "a-b-c", "a--b", "a-bc", "ab-c", "a1-b", "a-1b"} {
		if err := manifest.CheckTenantName(name); err != nil {
			t.Fatalf("CheckTenantName(%q) = %v", name, err)
		}
		ks := manifest.KeyspaceFor(name)
		if other, ok := seen[ks]; ok {
			t.Errorf("tenants %s and %s share keyspace %s", other, name, ks)
		}
		seen[ks] = name
	}
}

// TestLoadRefusesOtherTenantsTopicsAndKeyspaces: every field that names a
// topic or a keyspace must name the manifests' own tenant's.
func TestLoadRefusesOtherTenantsTopicsAndKeyspaces(t *testing.T) {
	const fn = "functions/user-activity.yaml"
	const other = "persistent://other/pipeline/secrets"
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name: "another tenant's keyspace",
			edits: []edit{{"tenant.yaml", "keyspace: shop", "keyspace: other"},
				{"views/user_activity.yaml", "keyspace: shop", ""}, {"views/product_sales.yaml", "keyspace: shop", ""},
				{"views/user_purchases_7d.yaml", "keyspace: shop", ""}, {"views/sku_units_1d.yaml", "keyspace: shop", ""}, {"views/sku_refunds.yaml", "keyspace: shop", ""},
				{"views/sku_page_views_before.yaml", "keyspace: shop", ""}},
			want: []wantProblem{{"tenant.yaml", "keyspace: other", "keyspace", `"other": tenant shop's keyspace is shop`}},
		},
		{
			name:  "a view in another keyspace",
			edits: []edit{{"views/user_activity.yaml", "keyspace: shop", "keyspace: other"}},
			want:  []wantProblem{{"views/user_activity.yaml", "keyspace: other", "keyspace", `the tenant's views live in its keyspace "shop"`}},
		},
		{
			name:  "input",
			edits: []edit{{fn, "  - persistent://shop/pipeline/valid", "  - persistent://shop/pipeline/valid\n  - " + other}},
			want:  []wantProblem{{fn, other, "inputs[1]", "is outside tenant shop"}},
		},
		{
			name:  "output",
			edits: []edit{{fn, "output: persistent://shop/pipeline/user-activity-ops", "output: " + other}},
			want: []wantProblem{{fn, other, "output", "is outside tenant shop"},
				{"views/user_activity.yaml", "input:", "sink.input", "nothing writes"}},
		},
		{
			name:  "customSchemaInputs",
			edits: []edit{{fn, "subName:", "customSchemaInputs:\n  " + other + ": STRING\nsubName:"}},
			want:  []wantProblem{{fn, "customSchemaInputs", "customSchemaInputs", "is outside tenant shop"}},
		},
		{
			name:  "customSchemaInputs naming the tenant's topic that inputs do not list",
			edits: []edit{{fn, "subName:", "customSchemaInputs:\n  persistent://shop/ledger/events: STRING\nsubName:"}},
			want:  []wantProblem{{fn, "customSchemaInputs", "customSchemaInputs", "is not one of inputs"}},
		},
		{
			name:  "customSerdeInputs",
			edits: []edit{{fn, "subName:", "customSerdeInputs:\n  " + other + ": x\nsubName:"}},
			want:  []wantProblem{{fn, "customSerdeInputs", "customSerdeInputs", "is outside tenant shop"}},
		},
		{
			name:  "topicsPattern",
			edits: []edit{{fn, "subName:", "topicsPattern: persistent://other/pipeline/.*\nsubName:"}},
			want:  []wantProblem{{fn, "topicsPattern", "topicsPattern", "may match other tenants' topics"}},
		},
		{
			name:  "inputSpecs",
			edits: []edit{{fn, "subName:", "inputSpecs:\n  " + other + ": {regexPattern: true}\nsubName:"}},
			want:  []wantProblem{{fn, "inputSpecs", "inputSpecs", "may name other tenants' topics"}},
		},
		{
			name:  "logTopic",
			edits: []edit{{fn, "subName:", "logTopic: " + other + "\nsubName:"}},
			want:  []wantProblem{{fn, "logTopic", "logTopic", "is outside tenant shop"}},
		},
		{
			name:  "dead-letter topic",
			edits: []edit{{fn, "deadLetterTopic: persistent://shop/pipeline/user-activity-dlq", "deadLetterTopic: " + other}},
			want:  []wantProblem{{fn, "deadLetterTopic", "userConfig.deadLetterTopic", "is outside tenant shop"}},
		},
		{
			name:  "sink's dead-letter topic",
			edits: []edit{{"views/user_activity.yaml", "deadLetterTopic: persistent://shop/pipeline/user_activity-sink-dlq", "deadLetterTopic: " + other}},
			want:  []wantProblem{{"views/user_activity.yaml", "deadLetterTopic", "sink.userConfig.deadLetterTopic", "is outside tenant shop"}},
		},
		{
			name: "sink's hosts, registry and keyspace",
			edits: []edit{{"views/user_activity.yaml", "    batch_size: 1000",
				"    batch_size: 1000\n    hosts: evil.example:9042\n    registry: other_views\n    keyspace: other"}},
			want: []wantProblem{
				{"views/user_activity.yaml", "hosts:", "sink.userConfig.hosts", "set by deploy"},
				{"views/user_activity.yaml", "registry:", "sink.userConfig.registry", "set by deploy"},
				{"views/user_activity.yaml", "keyspace: other", "sink.userConfig.keyspace", "set by deploy"},
			},
		},
		{
			name:  "sink in a namespace the tenant does not declare",
			edits: []edit{{"views/user_activity.yaml", "  parallelism: 1", "  parallelism: 1\n  namespace: elsewhere"}},
			want:  []wantProblem{{"views/user_activity.yaml", "namespace: elsewhere", "sink.namespace", `"elsewhere" is not a namespace`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}

// TestLoadRunsTheSinksSettingsParser: settings the sink would refuse at
// start are lint problems at their keys.
func TestLoadRunsTheSinksSettingsParser(t *testing.T) {
	const view = "views/user_activity.yaml"
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name:  "negative batch size, bad duration",
			edits: []edit{{view, "    batch_size: 1000", "    batch_size: -5\n    linger: 5x"}},
			want: []wantProblem{
				{view, "batch_size: -5", "sink.userConfig.batch_size", "-5: must be at least 1"},
				{view, "linger: 5x", "sink.userConfig.linger", `"5x": want a duration`},
			},
		},
		{
			name:  "words for a number",
			edits: []edit{{view, "    batch_size: 1000", "    batch_size: 1000\n    concurrency: lots"}},
			want:  []wantProblem{{view, "concurrency: lots", "sink.userConfig.concurrency", "want a whole number"}},
		},
		{
			name:  "unknown consistency",
			edits: []edit{{view, "consistency: LOCAL_QUORUM", "consistency: MOST"}},
			want:  []wantProblem{{view, "consistency: MOST", "sink.userConfig.consistency", "not a CQL consistency level"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}

// TestRetargetLeavesNoTopicInTheOldTenant: --tenant renames every field
// that names a topic, and the moved set is checked again.
func TestRetargetLeavesNoTopicInTheOldTenant(t *testing.T) {
	dir := testenv.ShopManifests(t)
	applyEdit(t, dir, edit{"functions/user-activity.yaml", "subName:",
		"logTopic: persistent://shop/pipeline/user-activity-log\ncustomSchemaInputs:\n  persistent://shop/pipeline/valid: STRING\n" +
			"customSerdeInputs:\n  persistent://shop/pipeline/valid: x\nsubName:"})
	set, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Retarget("shop-test", "shop_test"); err != nil {
		t.Fatalf("Retarget: %v", err)
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	tenants := regexp.MustCompile(`persistent://([^/"]+)/`).FindAllStringSubmatch(string(data), -1)
	if len(tenants) == 0 {
		t.Fatal("no topic found in the moved set")
	}
	for _, m := range tenants {
		if m[1] != "shop-test" {
			t.Errorf("a topic stayed in tenant %s: %s", m[1], m[0])
		}
	}
	if err := set.Retarget("shop-again", "shop_test"); !errors.Is(err, manifest.ErrInvalid) {
		t.Errorf("Retarget to a keyspace not the tenant's = %v, want problems", err)
	}
}

// wantExactly loads a copy of the shop manifests with edits applied (an
// edit with new empty comments old out) and checks that the problems are
// exactly want: with none, that the manifests load.
func wantExactly(t *testing.T, edits []edit, want []wantProblem) {
	t.Helper()
	dir := testenv.ShopManifests(t)
	for _, e := range edits {
		if e.new == "" {
			e.new = "# " + e.old
		}
		applyEdit(t, dir, e)
	}
	_, err := manifest.Load(dir)
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return
	}
	var problems manifest.Problems
	if !errors.Is(err, manifest.ErrInvalid) || !errors.As(err, &problems) {
		t.Fatalf("Load error = %v, want problems (ErrInvalid)", err)
	}
	for _, w := range want {
		file := filepath.Join(dir, w.file)
		line := lineOf(t, file, w.at)
		if !hasProblem(problems, file, line, w.field, w.message) {
			t.Errorf("missing problem %s:%d: %s: …%s…\ngot:\n%v", file, line, w.field, w.message, problems)
		}
	}
	if len(problems) > len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(problems), len(want), problems)
	}
}
