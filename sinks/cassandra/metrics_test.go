package cassandra

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The sink serves exactly the names MetricNames lists; confirmed
// operations feed the freshness histograms and raise the time gauges,
// which never go back; writes are timed once per attempt.
func TestSinkMetrics(t *testing.T) {
	m := NewSinkMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)
	m.Confirmed(at.Add(-8*time.Second), at.Add(-2*time.Second), at)
	m.Confirmed(at.Add(-30*time.Second), at.Add(-3*time.Second), at) // an older event, published earlier
	m.Confirmed(time.Time{}, at.Add(-time.Second), at)               // no event time
	m.Confirmed(at.Add(time.Minute), time.Time{}, at)                // an event time ahead of the clock

	a := &Applier{}
	a.SetMetrics(m)
	attempts := 0
	for _, err := range []error{errors.New("timeout"), nil} {
		if got := a.timed(func() error { attempts++; return err }); !errors.Is(got, err) {
			t.Fatalf("timed returned %v, want %v", got, err)
		}
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	var names []string
	for _, f := range families {
		got[f.GetName()] = f
		names = append(names, f.GetName())
	}
	want := MetricNames()
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("registered %v, MetricNames lists %v", names, want)
	}
	count := func(name string) uint64 { return got[name].GetMetric()[0].GetHistogram().GetSampleCount() }
	sum := func(name string) float64 { return got[name].GetMetric()[0].GetHistogram().GetSampleSum() }
	gauge := func(name string) float64 { return got[name].GetMetric()[0].GetGauge().GetValue() }
	if count(MetricFreshnessSeconds) != 3 || sum(MetricFreshnessSeconds) != 38 {
		t.Errorf("freshness: %d observations summing to %v, want 3 summing to 38 (8 + 30 + 0)", count(MetricFreshnessSeconds), sum(MetricFreshnessSeconds))
	}
	if count(MetricApplyDelaySeconds) != 3 || sum(MetricApplyDelaySeconds) != 6 {
		t.Errorf("apply delay: %d observations summing to %v, want 3 summing to 6", count(MetricApplyDelaySeconds), sum(MetricApplyDelaySeconds))
	}
	if count(MetricWriteSeconds) != 2 || attempts != 2 {
		t.Errorf("write: %d observations of %d attempts, want 2", count(MetricWriteSeconds), attempts)
	}
	if g := gauge(MetricNewestEventTime); g != float64(at.Add(time.Minute).Unix()) {
		t.Errorf("newest event time %v, want %v", g, at.Add(time.Minute).Unix())
	}
	if g := gauge(MetricLastAppliedPublishTime); g != float64(at.Add(-time.Second).Unix()) {
		t.Errorf("last applied publish time %v, want %v", g, at.Add(-time.Second).Unix())
	}
	if !m.LastAppliedPublishTime().Equal(at.Add(-time.Second)) || !m.NewestEventTime().Equal(at.Add(time.Minute)) {
		t.Errorf("times %v and %v", m.NewestEventTime(), m.LastAppliedPublishTime())
	}

	var none *SinkMetrics // measures nothing, and does not fail
	none.Confirmed(at, at, at)
	none.observeWrite(time.Second)
	if err := (&Applier{}).timed(func() error { return nil }); err != nil {
		t.Errorf("an applier without metrics: %v", err)
	}
}
