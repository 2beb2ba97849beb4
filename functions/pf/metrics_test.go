package pf

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/foldline/foldline/functions/envelope"
)

// ownReason is an error of a package that cannot import pf, which names
// its dead-letter reason itself.
type ownReason struct{ reason string }

func (e ownReason) Error() string            { return "own reason " + e.reason }
func (e ownReason) DeadLetterReason() string { return e.reason }

func TestDeadLettersCountedByReason(t *testing.T) {
	badOrigin := ledgerEvent("bad-origin", 3)
	badOrigin.props = map[string]string{envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "not a position"}
	tests := []struct {
		name    string
		in      *fakeMessage
		conf    func(*instanceConf)
		handler any
		// failDeadLetter makes the dead letter's send fail.
		failDeadLetter bool
		want           DeadLetterReason // "" for none
	}{
		{name: "permanent error without reason", handler: failing(Permanent(errors.New("no"))), want: ReasonRejected},
		{name: "error retried until maxRetries", handler: failing(errors.New("flaky")), want: ReasonRetriesExhausted},
		{name: "permanent error with a reason", handler: failing(Permanent(WithReason(ReasonSchema, errors.New("unknown column")))), want: ReasonSchema},
		{name: "reason without permanent still retries first", handler: failing(WithReason(ReasonMalformed, errors.New("bad"))), want: ReasonMalformed},
		{name: "error naming its reason itself", handler: failing(Permanent(ownReason{"malformed"})), want: ReasonMalformed},
		{name: "unknown reason counts as other", handler: failing(Permanent(ownReason{"the moon is full"})), want: ReasonOther},
		{name: "malformed origin properties", in: badOrigin, handler: func(in []byte) ([]byte, error) { return in, nil }, want: ReasonMalformed},
		{
			name:    "output too large",
			conf:    func(c *instanceConf) { c.MaxMessageBytes = 1000 },
			handler: func(in []byte) ([]byte, error) { return []byte(strings.Repeat("x", 2000)), nil },
			want:    ReasonTooLarge,
		},
		{name: "dead letter not confirmed", handler: failing(Permanent(errors.New("no"))), failDeadLetter: true},
		{name: "success", handler: func(in []byte) ([]byte, error) { return in, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := testConf()
			if tt.conf != nil {
				tt.conf(conf)
			}
			inst, out := newTestInstance(t, conf, tt.handler)
			if tt.failDeadLetter {
				out.fail[dlqTopic] = errors.New("broker says no")
			}
			in := tt.in
			if in == nil {
				in = ledgerEvent("a", 1)
			}
			if err := inst.process(t.Context(), in, &fakeAcker{}); err != nil {
				t.Fatal(err)
			}
			for i, reason := range DeadLetterReasons() {
				want := int64(0)
				if reason == tt.want {
					want = 1
				}
				if got := inst.stats.deadLetters[i].Load(); got != want {
					t.Errorf("dead letters for %s: %d, want %d", reason, got, want)
				}
			}
		})
	}
}

func failing(err error) func([]byte) ([]byte, error) {
	return func([]byte) ([]byte, error) { return nil, err }
}

// The metrics endpoint serves exactly the names MetricNames lists (what
// dashboards may rely on), the dead letters by every reason, and the
// handler's own metrics, histograms with their buckets, under the
// instance's labels.
func TestMetricsEndpointServesRuntimeAndHandlerMetrics(t *testing.T) {
	var once sync.Once
	const own = "test_payload_bytes"
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]byte, error) {
		fc, _ := FromContext(ctx)
		var h prometheus.Histogram
		var err error
		once.Do(func() {
			h = prometheus.NewHistogram(prometheus.HistogramOpts{Name: own, Help: "Payload sizes.", Buckets: []float64{1, 10}})
			err = fc.MetricsRegisterer().Register(h)
		})
		if err != nil {
			return nil, err
		}
		if h != nil {
			h.Observe(float64(len(in)))
		}
		fc.RecordMetric("size", float64(len(in)))
		return nil, Permanent(errors.New("no"))
	})
	stop, err := inst.serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := inst.process(t.Context(), ledgerEvent("abcde", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}
	// Exceptions by error are series only once there are some.
	inst.stats.recordException(systemException, errors.New("lost the connection"))

	families := scrapeFamilies(t, "http://"+inst.metricsAddr+"/metrics")
	var names []string
	for name := range families {
		if name != own {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	want := MetricNames()
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("served %v,\nMetricNames lists %v", names, want)
	}

	dead := families[MetricDeadLetters]
	if dead.GetType() != dto.MetricType_COUNTER || len(dead.GetMetric()) != len(DeadLetterReasons()) {
		t.Fatalf("%s: %v, want a counter per reason", MetricDeadLetters, dead)
	}
	for _, m := range dead.GetMetric() {
		want := 0.0
		if label(m, LabelReason) == string(ReasonRejected) {
			want = 1
		}
		if m.GetCounter().GetValue() != want || label(m, "fqfn") != "t/n/f" {
			t.Errorf("dead letters %v: want %v with the instance's labels", m, want)
		}
	}

	hist := families[own]
	if hist.GetType() != dto.MetricType_HISTOGRAM || len(hist.GetMetric()) != 1 {
		t.Fatalf("%s: %v, want one histogram", own, hist)
	}
	h := hist.GetMetric()[0]
	if h.GetHistogram().GetSampleCount() != 1 || len(h.GetHistogram().GetBucket()) != 3 ||
		label(h, "fqfn") != "t/n/f" || label(h, "instance_id") != "0" || label(h, "name") != "f" {
		t.Errorf("%s: %v, want one observation in 2 buckets and +Inf with the instance's labels", own, h)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families, err := new(expfmt.TextParser).TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the metrics page: %v", err)
	}
	return families
}

// A user metric recorded as a function is read at each report, by
// functions stats (GetMetrics) and by a scrape; RecordMetric under the
// same name replaces it, and the other way round.
func TestRecordMetricFunc(t *testing.T) {
	var inputs atomic.Int64
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]byte, error) {
		fc, _ := FromContext(ctx)
		fc.RecordMetricFunc("inputs", func() float64 { return float64(inputs.Load()) })
		fc.RecordMetricFunc("replaced", func() float64 { return 1 })
		fc.RecordMetric("replaced", 2)
		fc.RecordMetric("func wins", 3)
		fc.RecordMetricFunc("func wins", func() float64 { return 4 })
		return in, nil
	})
	stop, err := inst.serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := inst.process(t.Context(), ledgerEvent("a", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}
	inputs.Store(7)
	control := &controlService{s: inst.stats}
	if got := control.metrics().GetUserMetrics(); got["inputs"] != 7 || got["replaced"] != 2 || got["func wins"] != 4 || len(got) != 3 {
		t.Errorf("functions stats' user metrics %v, want inputs 7, replaced 2, func wins 4", got)
	}
	inputs.Store(9)
	for _, m := range scrapeFamilies(t, "http://"+inst.metricsAddr+"/metrics")[MetricUserMetric].GetMetric() {
		if label(m, "metric") == "inputs" && m.GetGauge().GetValue() != 9 {
			t.Errorf("scraped inputs %v, want 9", m.GetGauge().GetValue())
		}
	}
}
