// Package metrics is `foldline metrics`: a Prometheus exporter of what
// foldline status knows about one tenant's pipeline and that no function
// instance serves itself — each stage subscription's backlog (the lag per
// stage), the stages' instances running and wanted, each view's estimated
// rows, and every running backfill's progress.
//
// It reads the status when scraped (package status, over one pair of
// connections), so the figures are as fresh as the scrape and nothing is
// read while nobody scrapes; scrapes within a second share one reading.
// What the instances serve themselves (throughput, dead letters, the
// sink's write latency and freshness) Prometheus scrapes from the
// functions worker's /metrics.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/internal/promserve"
	"github.com/foldline/foldline/admin/status"
)

// The exporter's metrics. Every series has label tenant; the stage ones
// stage and kind (function or sink); the subscription one topic and
// subscription too; the view one view and table. The running backfills'
// come from package backfill (backfill.MetricNames).
const (
	// MetricSubscriptionBacklog is the messages waiting on a stage's
	// subscription to one of its input topics: the stage's lag.
	MetricSubscriptionBacklog = "foldline_subscription_backlog_messages"
	// MetricInstancesRunning and MetricInstancesWanted are a stage's
	// instances running and its parallelism.
	MetricInstancesRunning = "foldline_stage_instances_running"
	MetricInstancesWanted  = "foldline_stage_instances_wanted"
	// MetricViewRowsEstimated is a view's estimated live rows (see
	// foldline status).
	MetricViewRowsEstimated = "foldline_view_rows_estimated"
	// MetricUp is 1 when the last reading of the status worked, else 0
	// (the other series are then absent).
	MetricUp = "foldline_status_up"
)

// MetricNames lists the exporter's metric names, the running backfills'
// included, for dashboards and their tests.
func MetricNames() []string {
	return append([]string{MetricSubscriptionBacklog, MetricInstancesRunning, MetricInstancesWanted, MetricViewRowsEstimated, MetricUp},
		backfill.MetricNames()...)
}

// Options are metrics' settings.
type Options struct {
	status.Options
	// Listen is the address to serve on. Default 127.0.0.1:9465.
	Listen string
}

// NewCommand returns `foldline metrics`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "metrics [DIR]",
		Short: "Serve the pipeline's backlogs, instances, estimated rows and backfills as Prometheus metrics",
		Long: `Serve, for Prometheus to scrape, what foldline status shows of the pipeline of the
manifests in DIR (default manifests/) that the function instances do not serve
themselves: each stage subscription's backlog (` + MetricSubscriptionBacklog + `), each stage's
instances running and wanted, each view's estimated rows, and the progress of every
running backfill. The status is read when scraped. The instances' own metrics
(throughput, dead letters by reason, the sink's write latency and freshness) come from
the functions worker's /metrics.`,
		Example: "  foldline metrics\n  foldline metrics --tenant shop-test --listen 0.0.0.0:9465",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := opts.Bind(cmd, args); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Serve(ctx, opts, func(addr string) {
				fmt.Fprintf(opts.ErrOut, "serving metrics on http://%s/metrics (Ctrl-C stops)\n", addr)
			})
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:9465", "address to serve the metrics on")
	return cmd
}

// Serve serves the metrics on opts.Listen until ctx ends; listening is
// called with the address once it listens.
func Serve(ctx context.Context, opts Options, listening func(addr string)) error {
	src, err := status.Open(ctx, opts.Options)
	if err != nil {
		return err
	}
	defer src.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(&Collector{Tenant: src.Tenant(), Read: src.Report, Context: ctx})
	listen := opts.Listen
	if listen == "" {
		listen = "127.0.0.1:9465"
	}
	srv, err := promserve.Listen(listen, "--listen", reg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if listening != nil {
		listening(srv.Addr)
	}
	<-ctx.Done()
	return nil
}

// reuseFor is how long a reading serves scrapes: several Prometheus
// servers scraping at once cost the cluster one reading.
const reuseFor = time.Second

// readTimeout bounds one reading: Prometheus gives up on a scrape after
// 10 s by default.
const readTimeout = 9 * time.Second

// Collector turns status reports into metrics (a prometheus.Collector). It
// reads one report per scrape, at most one at a time.
type Collector struct {
	// Tenant labels MetricUp, which has it even when the reading fails.
	Tenant string
	// Read gathers a report (status.Source.Report).
	Read func(context.Context) (*status.Report, error)
	// Context is the run's: a reading ends with it.
	Context context.Context

	mu     sync.Mutex
	last   *status.Report
	lastAt time.Time
}

// Describe sends nothing: the series follow the pipeline.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the status (or reuses a reading under a second old) and
// sends its metrics; when the reading fails, MetricUp 0 alone.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	report, err := c.report()
	up := prometheus.NewDesc(MetricUp, "1 when the last reading of the status worked.", nil, prometheus.Labels{"tenant": c.Tenant})
	if err != nil {
		slog.Warn("reading the status for a scrape", "error", err)
		ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, 1)
	collectReport(ch, report)
}

func (c *Collector) report() (*status.Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.lastAt) < reuseFor {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(c.Context, readTimeout)
	defer cancel()
	report, err := c.Read(ctx)
	if err != nil {
		c.last = nil
		return nil, err
	}
	c.last, c.lastAt = report, time.Now()
	return report, nil
}

// collectReport sends the metrics of one report.
func collectReport(ch chan<- prometheus.Metric, r *status.Report) {
	tenant := prometheus.Labels{"tenant": r.Tenant}
	var (
		backlog = prometheus.NewDesc(MetricSubscriptionBacklog, "Messages waiting on a stage's subscription to an input topic.",
			[]string{"stage", "kind", "topic", "subscription"}, tenant)
		running = prometheus.NewDesc(MetricInstancesRunning, "Instances of the stage running.", []string{"stage", "kind"}, tenant)
		wanted  = prometheus.NewDesc(MetricInstancesWanted, "Instances the stage should run (its parallelism).", []string{"stage", "kind"}, tenant)
		rows    = prometheus.NewDesc(MetricViewRowsEstimated, "Estimated live rows of the view's active table.", []string{"view", "table"}, tenant)
	)
	gauge := func(d *prometheus.Desc, v float64, values ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, values...)
	}
	for _, s := range r.Stages {
		gauge(wanted, float64(s.Instances), s.Name, s.Kind)
		gauge(running, float64(s.Running), s.Name, s.Kind)
		for _, sub := range s.Subscriptions {
			if sub.Exists {
				gauge(backlog, float64(sub.Backlog), s.Name, s.Kind, sub.Topic, sub.Subscription)
			}
		}
	}
	for _, v := range r.Views {
		if v.RowsEstimated != nil {
			gauge(rows, float64(*v.RowsEstimated), v.View, v.Table)
		}
	}
	backfill.CollectSnapshots(ch, tenant, r.Backfills)
}
