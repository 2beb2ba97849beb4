package metrics

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/status"
)

func report() *status.Report {
	rows := int64(1234)
	return &status.Report{Tenant: "shop", Keyspace: "shop",
		Stages: []status.StageStatus{
			{Name: "validate", Kind: "function", Instances: 2, Running: 1, Subscriptions: []status.SubscriptionStatus{
				{Topic: "persistent://shop/ledger/events", Subscription: "validate-v1", Exists: true, Backlog: 42},
				{Topic: "persistent://shop/ledger/returns", Subscription: "validate-v1"}, // not subscribed: no series
			}},
			{Name: "user_activity_v1-sink", Kind: "sink", Instances: 1, Running: 1, Subscriptions: []status.SubscriptionStatus{
				{Topic: "persistent://shop/pipeline/user-activity-ops", Subscription: "sink-v1", Exists: true, Backlog: 7},
			}},
		},
		Views: []status.ViewStatus{
			{View: "user_activity", Table: "user_activity_v1", RowsEstimated: &rows},
			{View: "product_sales"}, // not deployed: no series
		},
		Backfills: []*backfill.Snapshot{{View: "user_activity", Table: "user_activity_v2", Elapsed: 12, Stages: []backfill.StageProgress{
			{Name: "validate-bf-user_activity_v2", Done: 30, Total: 100, Backlog: 70, Processed: 3000, DeadLettered: 1},
		}}},
	}
}

// gather collects c once, by name; each series by its labels.
func gather(t *testing.T, c prometheus.Collector) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, f := range families {
		got[f.GetName()] = map[string]float64{}
		for _, m := range f.GetMetric() {
			got[f.GetName()][labels(m)] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

func labels(m *dto.Metric) string {
	var s string
	for _, l := range m.GetLabel() {
		s += l.GetName() + "=" + l.GetValue() + " "
	}
	return s
}

func TestCollectorExportsTheStatus(t *testing.T) {
	reads := 0
	c := &Collector{Tenant: "shop", Context: context.Background(), Read: func(context.Context) (*status.Report, error) {
		reads++
		return report(), nil
	}}
	got := gather(t, c)
	want := map[string]map[string]float64{
		MetricUp: {"tenant=shop ": 1},
		MetricSubscriptionBacklog: {
			"kind=function stage=validate subscription=validate-v1 tenant=shop topic=persistent://shop/ledger/events ":                   42,
			"kind=sink stage=user_activity_v1-sink subscription=sink-v1 tenant=shop topic=persistent://shop/pipeline/user-activity-ops ": 7,
		},
		MetricInstancesRunning:           {"kind=function stage=validate tenant=shop ": 1, "kind=sink stage=user_activity_v1-sink tenant=shop ": 1},
		MetricInstancesWanted:            {"kind=function stage=validate tenant=shop ": 2, "kind=sink stage=user_activity_v1-sink tenant=shop ": 1},
		MetricViewRowsEstimated:          {"table=user_activity_v1 tenant=shop view=user_activity ": 1234},
		backfill.MetricEntriesDone:       {"stage=validate-bf-user_activity_v2 table=user_activity_v2 tenant=shop view=user_activity ": 30},
		backfill.MetricEntriesExpected:   {"stage=validate-bf-user_activity_v2 table=user_activity_v2 tenant=shop view=user_activity ": 100},
		backfill.MetricBacklogEntries:    {"stage=validate-bf-user_activity_v2 table=user_activity_v2 tenant=shop view=user_activity ": 70},
		backfill.MetricEventsProcessed:   {"stage=validate-bf-user_activity_v2 table=user_activity_v2 tenant=shop view=user_activity ": 3000},
		backfill.MetricDeadLetterEntries: {"stage=validate-bf-user_activity_v2 table=user_activity_v2 tenant=shop view=user_activity ": 1},
		backfill.MetricCaughtUp:          {"table=user_activity_v2 tenant=shop view=user_activity ": 0},
		backfill.MetricElapsedSeconds:    {"table=user_activity_v2 tenant=shop view=user_activity ": 12},
	}
	for name, series := range want {
		for l, v := range series {
			if g, ok := got[name][l]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, l, g, ok, v)
			}
		}
		if len(got[name]) != len(series) {
			t.Errorf("%s: %d series, want %d: %v", name, len(got[name]), len(series), got[name])
		}
	}
	for name := range got {
		if !slices.Contains(MetricNames(), name) {
			t.Errorf("%s is exported but not in MetricNames", name)
		}
	}
	gather(t, c) // within a second: the same reading
	if reads != 1 {
		t.Errorf("%d readings for two scrapes within a second, want 1", reads)
	}
}

func TestCollectorSaysWhenTheStatusCannotBeRead(t *testing.T) {
	c := &Collector{Tenant: "shop", Context: context.Background(), Read: func(context.Context) (*status.Report, error) {
		return nil, errors.New("Pulsar is down")
	}}
	got := gather(t, c)
	if len(got) != 1 || got[MetricUp]["tenant=shop "] != 0 || len(got[MetricUp]) != 1 {
		t.Errorf("scrape while the status cannot be read: %v, want %s{tenant=shop} 0 alone", got, MetricUp)
	}
}
