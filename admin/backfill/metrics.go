package backfill

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a backfill's progress, from its snapshots (see StageProgress
// for what the figures mean): served by foldline backfill --metrics-listen
// while it runs, and by foldline metrics for every running backfill of the
// tenant. Labels: view and table (the one being built) on all; stage on
// the per-stage ones. Entries are the broker's (a batch of events is one
// entry), the unit of topic sizes and backlogs.
const (
	// MetricEntriesDone is how many entries of its input a stage has
	// acknowledged; MetricEntriesExpected what it has to get through
	// (done / expected is the progress).
	MetricEntriesDone     = "foldline_backfill_entries_done"
	MetricEntriesExpected = "foldline_backfill_entries_expected"
	// MetricBacklogEntries is what waits on the stage's subscription now.
	MetricBacklogEntries = "foldline_backfill_backlog_entries"
	// MetricEventsProcessed counts the events the stage's running
	// instances processed since each started.
	MetricEventsProcessed = "foldline_backfill_events_processed"
	// MetricDeadLetterEntries counts the entries in the stage's
	// dead-letter topic.
	MetricDeadLetterEntries = "foldline_backfill_dead_letter_entries"
	// MetricCaughtUp is 1 once every stage has caught up, else 0.
	MetricCaughtUp = "foldline_backfill_caught_up"
	// MetricElapsedSeconds is the time since the backfill started.
	MetricElapsedSeconds = "foldline_backfill_elapsed_seconds"
	// MetricFusedEventsRead counts the ledger events a fused backfill
	// (--engine fused) has read on this machine before it deploys the
	// copy; only foldline backfill --metrics-listen serves it.
	MetricFusedEventsRead = "foldline_backfill_fused_events_read"
)

// MetricNames lists the backfill's metric names, for dashboards and their
// tests.
func MetricNames() []string {
	return []string{MetricEntriesDone, MetricEntriesExpected, MetricBacklogEntries, MetricEventsProcessed,
		MetricDeadLetterEntries, MetricCaughtUp, MetricElapsedSeconds, MetricFusedEventsRead}
}

var (
	viewLabels  = []string{"view", "table"}
	stageLabels = []string{"view", "table", "stage"}
)

// CollectSnapshots sends the metrics of snaps, each series with labels
// added (foldline metrics adds the tenant).
func CollectSnapshots(ch chan<- prometheus.Metric, labels prometheus.Labels, snaps []*Snapshot) {
	desc := func(name, help string, variable []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, variable, labels)
	}
	var (
		done     = desc(MetricEntriesDone, "Entries of its input the backfill's stage has acknowledged.", stageLabels)
		expected = desc(MetricEntriesExpected, "Entries the backfill's stage has to get through.", stageLabels)
		backlog  = desc(MetricBacklogEntries, "Entries waiting on the backfill stage's subscription.", stageLabels)
		events   = desc(MetricEventsProcessed, "Events the backfill stage's running instances processed since each started.", stageLabels)
		dead     = desc(MetricDeadLetterEntries, "Entries in the backfill stage's dead-letter topic.", stageLabels)
		caughtUp = desc(MetricCaughtUp, "1 once every stage of the backfill has caught up.", viewLabels)
		elapsed  = desc(MetricElapsedSeconds, "Time since the backfill started.", viewLabels)
	)
	gauge := func(d *prometheus.Desc, v float64, values ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, values...)
	}
	for _, s := range snaps {
		caught := 0.0
		if s.CaughtUp {
			caught = 1
		}
		gauge(caughtUp, caught, s.View, s.Table)
		gauge(elapsed, s.Elapsed, s.View, s.Table)
		for _, p := range s.Stages {
			gauge(done, float64(p.Done), s.View, s.Table, p.Name)
			gauge(expected, float64(p.Total), s.View, s.Table, p.Name)
			gauge(backlog, float64(p.Backlog), s.View, s.Table, p.Name)
			gauge(events, float64(p.Processed), s.View, s.Table, p.Name)
			gauge(dead, float64(p.DeadLettered), s.View, s.Table, p.Name)
		}
	}
}

// Progress is one backfill's progress as Prometheus metrics (a
// prometheus.Collector): the latest snapshot its watch took and, for a
// fused backfill, the ledger events read so far. Safe for concurrent use;
// a nil *Progress records nothing.
type Progress struct {
	mu   sync.Mutex
	snap *Snapshot
	// view and table name the backfill once it is known.
	view, table string
	fusedRead   atomic.Int64
	fused       bool
}

// Describe sends nothing: the series come and go with the backfill.
func (p *Progress) Describe(chan<- *prometheus.Desc) {}

// Collect sends the latest snapshot's metrics and the fused run's count.
func (p *Progress) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	snap, view, table, fused := p.snap, p.view, p.table, p.fused
	p.mu.Unlock()
	if snap != nil {
		CollectSnapshots(ch, nil, []*Snapshot{snap})
	}
	if fused {
		d := prometheus.NewDesc(MetricFusedEventsRead, "Ledger events the fused backfill has read on this machine.", viewLabels, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(p.fusedRead.Load()), view, table)
	}
}

// observe keeps s as the latest snapshot.
func (p *Progress) observe(s *Snapshot) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.snap, p.view, p.table = s, s.View, s.Table
	p.mu.Unlock()
}

// fusing starts counting a fused run's events for view's table.
func (p *Progress) fusing(view, table string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.view, p.table, p.fused = view, table, true
	p.mu.Unlock()
}

// read counts n more events of a fused run.
func (p *Progress) read(n int) {
	if p != nil {
		p.fusedRead.Add(int64(n))
	}
}
