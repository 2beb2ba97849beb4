package manifest_test

import (
	"testing"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// TestLoadRefusesConsistencyThatCannotBeExact: the sink reads a row before
// it writes it at one level, so lint refuses a level whose reads can miss
// its writes for the keyspace's replication, or that can never succeed, and
// a sink that would refuse the tenant's keyspace.
func TestLoadRefusesConsistencyThatCannotBeExact(t *testing.T) {
	const (
		tenant = "tenant.yaml"
		ua     = "views/user_activity.yaml"
		ps     = "views/product_sales.yaml"
	)
	rf := func(n string) edit {
		return edit{tenant, `replication_factor: "1"`, `replication_factor: "` + n + `"`}
	}
	sinkRF := func(view, n, level string) edit {
		return edit{view, "    consistency: LOCAL_QUORUM",
			"    consistency: " + level + "\n    replication: {class: SimpleStrategy, replication_factor: \"" + n + "\"}"}
	}
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name:  "ONE with two replicas",
			edits: []edit{rf("2"), sinkRF(ua, "2", "ONE"), sinkRF(ps, "2", "LOCAL_QUORUM")},
			want:  []wantProblem{{ua, "consistency: ONE", "sink.userConfig.consistency", "wait for 1 of keyspace shop's 2 replicas each"}},
		},
		{
			name:  "THREE with two replicas",
			edits: []edit{rf("2"), sinkRF(ua, "2", "THREE"), sinkRF(ps, "2", "ALL")},
			want:  []wantProblem{{ua, "consistency: THREE", "sink.userConfig.consistency", "no read or write would ever succeed"}},
		},
		{
			name:  "a level writes cannot take",
			edits: []edit{sinkRF(ua, "1", "ANY"), sinkRF(ps, "1", "ONE")},
			want:  []wantProblem{{ua, "consistency: ANY", "sink.userConfig.consistency", "writes only"}},
		},
		{
			name: "LOCAL_QUORUM across data centres",
			edits: []edit{
				{tenant, "class: SimpleStrategy\n  replication_factor: \"1\"", "class: NetworkTopologyStrategy\n  dc1: \"2\"\n  dc2: \"2\""},
				{ua, "    consistency: LOCAL_QUORUM", "    consistency: LOCAL_QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
				{ps, "    consistency: LOCAL_QUORUM", "    consistency: QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
				{"views/user_purchases_7d.yaml", "    consistency: LOCAL_QUORUM", "    consistency: QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
				{"views/sku_units_1d.yaml", "    consistency: LOCAL_QUORUM", "    consistency: QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
				{"views/sku_refunds.yaml", "    consistency: LOCAL_QUORUM", "    consistency: QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
				{"views/sku_page_views_before.yaml", "    consistency: LOCAL_QUORUM", "    consistency: QUORUM\n    replication: {class: NetworkTopologyStrategy, dc1: \"2\", dc2: \"2\"}"},
			},
			want: []wantProblem{{ua, "consistency: LOCAL_QUORUM", "sink.userConfig.consistency", "replicas in 2 data centres"}},
		},
		{
			name:  "a sink's own replication against the tenant's",
			edits: []edit{sinkRF(ps, "2", "LOCAL_QUORUM")},
			want:  []wantProblem{{ps, "replication:", "sink.userConfig.replication", "refuses it as created with the tenant's"}},
		},
		{
			name:  "a bad replication factor",
			edits: []edit{rf("two")},
			want:  []wantProblem{{tenant, "replication:", "replication", `replication_factor "two": want a whole number`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}

// TestLoadTakesOverlappingConsistency: levels whose reads always meet the
// writes pass, for one and two replicas.
func TestLoadTakesOverlappingConsistency(t *testing.T) {
	cases := []struct {
		name, rf, ua, ps string
	}{
		{name: "ONE with one replica", rf: "1", ua: "ONE", ps: "ONE"},
		{name: "LOCAL_QUORUM and ALL with two replicas", rf: "2", ua: "LOCAL_QUORUM", ps: "ALL"},
		{name: "QUORUM and TWO with three replicas", rf: "3", ua: "QUORUM", ps: "TWO"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShopManifests(t)
			applyEdit(t, dir, edit{"tenant.yaml", `replication_factor: "1"`, `replication_factor: "` + tc.rf + `"`})
			for view, level := range map[string]string{"views/user_activity.yaml": tc.ua, "views/product_sales.yaml": tc.ps} {
				applyEdit(t, dir, edit{view, "    consistency: LOCAL_QUORUM",
					"    consistency: " + level + "\n    replication: {class: SimpleStrategy, replication_factor: \"" + tc.rf + "\"}"})
			}
			if _, err := manifest.Load(dir); err != nil {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}
