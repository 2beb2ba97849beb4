package backfill

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// --metrics-listen serves the latest snapshot of the watch and, for a
// fused run, the events it has read, under names MetricNames lists.
func TestProgressServesTheLatestSnapshot(t *testing.T) {
	var none *Progress // records nothing, and does not fail
	none.observe(&Snapshot{})
	none.fusing("v", "t")
	none.read(3)

	p := &Progress{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(p)
	count := func() (map[string]float64, []string) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		values, names := map[string]float64{}, []string{}
		for _, f := range families {
			names = append(names, f.GetName())
			for _, m := range f.GetMetric() {
				values[f.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return values, names
	}
	if values, _ := count(); len(values) != 0 {
		t.Errorf("before anything happened: %v, want nothing", values)
	}
	p.fusing("user_activity", "user_activity_v2")
	p.read(2000)
	p.read(500)
	p.observe(&Snapshot{View: "user_activity", Table: "user_activity_v2", Stages: []StageProgress{{Name: "validate", Done: 10, Total: 40}}})
	p.observe(&Snapshot{View: "user_activity", Table: "user_activity_v2", CaughtUp: true, Stages: []StageProgress{{Name: "validate", Done: 40, Total: 40}}})
	values, names := count()
	if values[MetricFusedEventsRead] != 2500 || values[MetricEntriesDone] != 40 || values[MetricEntriesExpected] != 40 || values[MetricCaughtUp] != 1 {
		t.Errorf("progress %v, want 2500 events read fused and the latest snapshot: 40 of 40, caught up", values)
	}
	for _, name := range names {
		if !slices.Contains(MetricNames(), name) {
			t.Errorf("%s is served but not in MetricNames", name)
		}
	}
}
