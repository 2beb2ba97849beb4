package pf

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foldline/foldline/internal/textcap"
)

// cacheLine is a processor's cache line size, at least.
const cacheLine = 64

// maxLatestExceptions is how many recent exceptions of each kind status shows.
const maxLatestExceptions = 10

// counter is a running total and its value when the current one-minute
// window started, so that counting is one atomic addition.
type counter struct{ total, windowStart atomic.Int64 }

func (c *counter) inc() { c.total.Add(1) }

// window returns the count over the current one-minute window.
func (c *counter) window() int64 {
	start := c.windowStart.Load() // first: a reset in between must not make the count negative
	return c.total.Load() - start
}

func (c *counter) resetWindow() { c.windowStart.Store(c.total.Load()) }

// latency sums process latencies, in counters so that the window's sum and
// count are kept as for any count.
type latency struct {
	sumNanos, count counter
}

func (l *latency) observe(d time.Duration) {
	l.sumNanos.total.Add(int64(d))
	l.count.inc()
}

// avgMs is the average latency in ms over the total.
func (l *latency) avgMs() float64 { return avgMs(l.sumNanos.total.Load(), l.count.total.Load()) }

// windowAvgMs is the average latency in ms over the current window.
func (l *latency) windowAvgMs() float64 { return avgMs(l.sumNanos.window(), l.count.window()) }

func avgMs(sumNanos, count int64) float64 {
	if count == 0 {
		return 0
	}
	return float64(sumNanos) / float64(count) / 1e6
}

// exceptionInfo is one recent exception.
type exceptionInfo struct {
	text string
	at   time.Time
}

// exceptionKind names the four kinds of exception the worker reports.
type exceptionKind int

const (
	userException exceptionKind = iota
	systemException
	sourceException
	sinkException
	exceptionKinds
)

// stats holds the instance's counts, read by the control service and the
// Prometheus endpoint. It is safe for concurrent use; the hot path is atomics.
type stats struct {
	// received, latency and lastInvocationMs are written by the goroutine
	// that takes messages, processed by the producers' callbacks: a cache
	// line apart, so that the two do not take it from each other for every
	// message.
	received         counter
	latency          latency
	lastInvocationMs atomic.Int64
	_                [cacheLine]byte
	processed        counter
	_                [cacheLine]byte
	exceptions       [exceptionKinds]counter
	// deadLetters counts the confirmed dead letters by reason.
	deadLetters [deadLetterReasons]atomic.Int64
	// started is when the stats were made. Invocations are timed by the
	// monotonic clock since then, one cheap clock read at each end instead
	// of a wall-clock read too.
	started time.Time

	// notRunning is why the instance is not running (it could not
	// start), nil while it runs: see notStarted.
	notRunning atomic.Pointer[string]

	mu          sync.Mutex
	latest      [exceptionKinds][]exceptionInfo
	userMetrics map[string]float64
	// userMetricFuncs are the user metrics read when they are reported
	// (recordUserMetricFunc).
	userMetricFuncs map[string]func() float64
}

func newStats() *stats {
	return &stats{userMetrics: map[string]float64{}, userMetricFuncs: map[string]func() float64{}, started: time.Now()}
}

// now returns the time since the stats were made, by the monotonic clock.
func (s *stats) now() time.Duration { return time.Since(s.started) }

// notStarted records why the instance could not start: the control
// service then reports it not running, with the reason as its failure
// (the `error` of pulsar-admin functions status), and the reason is also
// one of its latest system exceptions, which the worker keeps where it
// overwrites the failure (a restarted instance's, with the empty text of
// its death).
func (s *stats) notStarted(reason error) {
	s.recordException(systemException, reason)
	text := textcap.Truncate(reason.Error(), maxReasonBytes)
	if text == "" {
		text = "the instance could not start"
	}
	s.notRunning.Store(&text)
}

// runs records that the instance runs (again).
func (s *stats) runs() { s.notRunning.Store(nil) }

func (s *stats) recordException(kind exceptionKind, err error) {
	s.exceptions[kind].inc()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := append(s.latest[kind], exceptionInfo{text: textcap.Truncate(err.Error(), maxReasonBytes), at: time.Now()})
	if len(l) > maxLatestExceptions {
		l = l[len(l)-maxLatestExceptions:]
	}
	s.latest[kind] = l
}

// recordInvocation records a handler call between start and end, both
// taken with now.
func (s *stats) recordInvocation(start, end time.Duration) {
	s.latency.observe(end - start)
	s.lastInvocationMs.Store(s.started.Add(start).UnixMilli())
}

// recordUserMetric records a metric under name made valid UTF-8 and cut to
// maxLabelBytes: the name becomes a Prometheus label and a protobuf map key.
func (s *stats) recordUserMetric(name string, value float64) {
	name = textcap.Truncate(name, maxLabelBytes)
	s.mu.Lock()
	s.userMetrics[name] = value
	delete(s.userMetricFuncs, name)
	s.mu.Unlock()
}

// recordUserMetricFunc records a metric under name (as recordUserMetric)
// whose value is value's at each report.
func (s *stats) recordUserMetricFunc(name string, value func() float64) {
	name = textcap.Truncate(name, maxLabelBytes)
	s.mu.Lock()
	s.userMetricFuncs[name] = value
	delete(s.userMetrics, name)
	s.mu.Unlock()
}

func (s *stats) latestExceptions(kind exceptionKind) []exceptionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]exceptionInfo(nil), s.latest[kind]...)
}

// userMetricsCopy returns the user metrics' values now. The functions are
// called without the lock: they are the handler's.
func (s *stats) userMetricsCopy() map[string]float64 {
	s.mu.Lock()
	m := make(map[string]float64, len(s.userMetrics)+len(s.userMetricFuncs))
	for k, v := range s.userMetrics {
		m[k] = v
	}
	funcs := maps.Clone(s.userMetricFuncs)
	s.mu.Unlock()
	for k, f := range funcs {
		m[k] = f()
	}
	return m
}

// resetWindow starts a new one-minute window.
func (s *stats) resetWindow() {
	s.received.resetWindow()
	s.processed.resetWindow()
	for i := range s.exceptions {
		s.exceptions[i].resetWindow()
	}
	s.latency.sumNanos.resetWindow()
	s.latency.count.resetWindow()
}

// collector exposes stats to Prometheus under the metric names and labels
// the Pulsar functions worker uses, reading the atomics at scrape time.
type collector struct {
	s      *stats
	labels prometheus.Labels
}

func metricDesc(name, help string, labels prometheus.Labels, variable ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, variable, labels)
}

// Describe sends nothing: the user metrics are not known in advance, which
// makes this an unchecked collector.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// maxLabelBytes bounds a label value taken from data (an exception's text,
// a user metric's name).
const maxLabelBytes = 512

// Collect sends the metrics. Exception texts are made valid UTF-8 and cut
// to maxLabelBytes for their label (as user metric names are when
// recorded), since the Prometheus client refuses
// (with a panic, in the scrape's goroutine, which would end the process)
// a label that is not valid UTF-8; a panic here is logged, not fatal.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("collecting metrics panicked", "panic", v)
		}
	}()
	gauge := func(name, help string, v int64) {
		ch <- prometheus.MustNewConstMetric(metricDesc(name, help, c.labels), prometheus.GaugeValue, float64(v))
	}
	both := func(name, help string, ctr *counter) {
		gauge(name, help, ctr.total.Load())
		gauge(name+windowSuffix, help+" in the last minute", ctr.window())
	}
	both(MetricReceived, "Messages received.", &c.s.received)
	both(MetricProcessedSuccessfully, "Messages processed successfully.", &c.s.processed)
	both(MetricUserExceptions, "Handler errors.", &c.s.exceptions[userException])
	var sys, sys1 int64
	for _, k := range []exceptionKind{systemException, sourceException, sinkException} {
		sys += c.s.exceptions[k].total.Load()
		sys1 += c.s.exceptions[k].window()
	}
	gauge(MetricSystemExceptions, "Runtime errors.", sys)
	gauge(MetricSystemExceptions1Min, "Runtime errors in the last minute.", sys1)
	gauge(MetricLastInvocation, "Start of the last handler call, ms since the epoch.", c.s.lastInvocationMs.Load())

	l := &c.s.latency
	ch <- prometheus.MustNewConstSummary(metricDesc(MetricProcessLatencyMs, "Handler latency.", c.labels),
		uint64(l.count.total.Load()), float64(l.sumNanos.total.Load())/1e6, nil)
	ch <- prometheus.MustNewConstSummary(metricDesc(MetricProcessLatencyMs1Min, "Handler latency in the last minute.", c.labels),
		uint64(l.count.window()), float64(l.sumNanos.window())/1e6, nil)

	dead := metricDesc(MetricDeadLetters, "Inputs sent to the dead-letter topic (confirmed), by reason class.", c.labels, LabelReason)
	for i, reason := range DeadLetterReasons() {
		ch <- prometheus.MustNewConstMetric(dead, prometheus.CounterValue, float64(c.s.deadLetters[i].Load()), string(reason))
	}

	for kind, name := range map[exceptionKind]string{userException: MetricUserException, systemException: MetricSystemException} {
		desc := metricDesc(name, "Recent exceptions, valued by when they happened (ms since the epoch).", c.labels, "error")
		// One series per distinct error text, valued by its latest time:
		// repeated label values would fail the whole scrape.
		latest := map[string]int64{}
		for _, e := range c.s.latestExceptions(kind) {
			label := textcap.Truncate(e.text, maxLabelBytes)
			latest[label] = max(latest[label], e.at.UnixMilli())
		}
		for text, ms := range latest {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(ms), text)
		}
	}
	userMetrics := c.s.userMetricsCopy()
	desc := metricDesc(MetricUserMetric, "Last value recorded by the handler with RecordMetric.", c.labels, "metric")
	for _, n := range slices.Sorted(maps.Keys(userMetrics)) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, userMetrics[n], n)
	}
}

// promLabels are the labels the worker's metrics carry for an instance. The
// instance_id is the instance number, as the Java runtime has it.
func promLabels(c *instanceConf) prometheus.Labels {
	return prometheus.Labels{
		"tenant":      c.Tenant,
		"namespace":   c.Tenant + "/" + c.Namespace,
		"name":        c.Name,
		"instance_id": strconv.Itoa(c.InstanceID),
		"cluster":     c.ClusterName,
		"fqfn":        c.FQFN(),
	}
}
