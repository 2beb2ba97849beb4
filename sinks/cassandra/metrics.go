package cassandra

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics the sink serves on its instance's metrics endpoint (package pf,
// FunctionContext.MetricsRegisterer), each series with the instance's
// labels. The histograms come with their buckets: the functions worker's
// /metrics passes the instance's text on as it is.
const (
	// MetricWriteSeconds is the time of each write request to Cassandra
	// (an unlogged batch of rows or one row's UPDATE), every attempt,
	// failed ones included.
	MetricWriteSeconds = "foldline_sink_write_seconds"
	// MetricFreshnessSeconds is, per operation Cassandra confirmed, the
	// time from its event time (the ledger event's, which the pipeline
	// carries) to the confirmation: how old the event was when its row
	// held it. For events published when they happen this is the
	// ledger-to-view freshness; a replay of old events reads as old.
	// Operations without event time are not observed.
	MetricFreshnessSeconds = "foldline_sink_freshness_seconds"
	// MetricApplyDelaySeconds is, per operation Cassandra confirmed, the
	// time from its publish to the sink's input topic to the confirmation:
	// the sink's own share of the freshness (its backlog, batching and
	// write).
	MetricApplyDelaySeconds = "foldline_sink_apply_delay_seconds"
	// MetricNewestEventTime is the greatest event time among the
	// operations confirmed since the instance started, in seconds since
	// the epoch; 0 until one is.
	MetricNewestEventTime = "foldline_sink_newest_event_time_seconds"
	// MetricLastAppliedPublishTime is the latest publish time (to the
	// sink's input topic) among the operations confirmed since the
	// instance started, in seconds since the epoch (0 until one is):
	// time() minus it is how far behind the sink is while it has a
	// backlog.
	MetricLastAppliedPublishTime = "foldline_sink_last_applied_publish_time_seconds"
)

// MetricNames lists the metric names the sink serves itself, for
// dashboards and their tests; UserMetricNames the names it records as
// user metrics.
func MetricNames() []string {
	return []string{MetricWriteSeconds, MetricFreshnessSeconds, MetricApplyDelaySeconds, MetricNewestEventTime, MetricLastAppliedPublishTime}
}

// UserMetricNames lists the user metrics the sink records (functions
// stats' userMetrics, and the instance's pulsar_function_user_metric by
// label metric): its Totals, and the newest event and last publish times
// (as MetricNewestEventTime and MetricLastAppliedPublishTime), which
// foldline status reads.
func UserMetricNames() []string {
	return []string{MetricApplied, MetricSkipped, MetricRejected, MetricExpired, MetricNewestEventTime, MetricLastAppliedPublishTime}
}

// Buckets of the histograms, in seconds.
var (
	writeBuckets     = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	freshnessBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// SinkMetrics measures a sink: its writes (set on the Applier with
// SetMetrics) and its confirmed operations (Confirmed). Safe for
// concurrent use; a nil *SinkMetrics measures nothing.
type SinkMetrics struct {
	write, freshness, applyDelay prometheus.Histogram
	// newestEventNanos and lastPublishNanos only grow; 0 is none yet.
	newestEventNanos, lastPublishNanos atomic.Int64
}

// NewSinkMetrics returns the sink's metrics, not registered yet.
func NewSinkMetrics() *SinkMetrics {
	return &SinkMetrics{
		write: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricWriteSeconds,
			Help: "Time of each write request to Cassandra (every attempt).", Buckets: writeBuckets}),
		freshness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricFreshnessSeconds,
			Help: "From a confirmed operation's event time to Cassandra's confirmation.", Buckets: freshnessBuckets}),
		applyDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricApplyDelaySeconds,
			Help: "From a confirmed operation's publish to the sink's topic to Cassandra's confirmation.", Buckets: freshnessBuckets}),
	}
}

// Register registers the metrics with reg.
func (m *SinkMetrics) Register(reg prometheus.Registerer) error {
	newest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricNewestEventTime,
		Help: "Greatest event time of the operations confirmed since the instance started (seconds since the epoch)."},
		func() float64 { return seconds(m.newestEventNanos.Load()) })
	published := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricLastAppliedPublishTime,
		Help: "Latest publish time of the operations confirmed since the instance started (seconds since the epoch)."},
		func() float64 { return seconds(m.lastPublishNanos.Load()) })
	for _, c := range []prometheus.Collector{m.write, m.freshness, m.applyDelay, newest, published} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observeWrite records one write request that took d.
func (m *SinkMetrics) observeWrite(d time.Duration) {
	if m != nil {
		m.write.Observe(d.Seconds())
	}
}

// Confirmed records an operation that Cassandra confirmed at at, with its
// event time (zero when it has none) and the publish time of its message.
func (m *SinkMetrics) Confirmed(eventTime, published, at time.Time) {
	if m == nil {
		return
	}
	if !eventTime.IsZero() {
		m.freshness.Observe(max(at.Sub(eventTime), 0).Seconds())
		raise(&m.newestEventNanos, eventTime.UnixNano())
	}
	if !published.IsZero() {
		m.applyDelay.Observe(max(at.Sub(published), 0).Seconds())
		raise(&m.lastPublishNanos, published.UnixNano())
	}
}

// NewestEventTime and LastAppliedPublishTime return the gauges' values,
// zero before any operation was confirmed.
func (m *SinkMetrics) NewestEventTime() time.Time { return unixNanos(m.newestEventNanos.Load()) }

// LastAppliedPublishTime: see NewestEventTime.
func (m *SinkMetrics) LastAppliedPublishTime() time.Time {
	return unixNanos(m.lastPublishNanos.Load())
}

// raise sets v to n if n is greater.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

func seconds(nanos int64) float64 { return float64(nanos) / 1e9 }

func unixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
