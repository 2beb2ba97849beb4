// Package status is `foldline status`: the deployed DAG as a table, upstream
// first — each stage's instances (running, restarts, processed, errors),
// each subscription's backlog and rate, and each view's estimated rows and
// freshness (the newest event its sink confirmed and when it last
// applied anything). It reads the manifests for the DAG and the cluster for
// the rest, so a stage the manifests declare but the cluster lacks shows as
// not deployed.
//
// Status is read every few seconds (status --watch, foldline ui), so it
// reads no table whole: the rows are estimated from a bounded read
// (package rowestimate), and the freshness comes from the sinks' own
// figures (their user metrics in functions stats). Options.CountRows counts
// some views' rows exactly, with a full read of their tables.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"
	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/rowestimate"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/internal/viewscan"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/admin/progress"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/textcap"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Options are status's settings.
type Options struct {
	target.Command
	// Now is the clock for ages. Default time.Now.
	Now func() time.Time
	// Watch prints the report again every Interval until interrupted.
	Watch    bool
	Interval time.Duration
	// CountRows names views whose live rows are counted exactly (and
	// whose newest event is read from the table), by reading the whole
	// active table: for a one-off look at one view (foldline views
	// describe), never for a report read again and again. Default none.
	CountRows []string
}

// Report is the status of one tenant's pipeline.
type Report struct {
	// At is when the report was gathered.
	At       time.Time     `json:"at"`
	Tenant   string        `json:"tenant"`
	Keyspace string        `json:"keyspace"`
	Stages   []StageStatus `json:"stages"`
	Views    []ViewStatus  `json:"views"`
	// Backfills are the running backfills with their progress.
	Backfills []*backfill.Snapshot `json:"backfills"`
}

// StageStatus is one function or sink.
type StageStatus struct {
	Name     string `json:"name"`
	FullName string `json:"fullName"`
	Kind     string `json:"kind"`
	// Upstream names the stages that write this one's inputs ("ledger"
	// for a ledger topic).
	Upstream []string `json:"upstream"`
	// View is the view a sink writes, "" for a function.
	View string `json:"view,omitempty"`
	// RunsAs is the function that does the stage's work when it is not
	// the stage's own: a backfill's copy, for the view's active table.
	RunsAs   string `json:"runsAs,omitempty"`
	Deployed bool   `json:"deployed"`
	// Instances is the wanted parallelism; Running how many run.
	Instances int `json:"instances"`
	Running   int `json:"running"`
	// Totals over the instances.
	Restarts  int64 `json:"restarts"`
	Received  int64 `json:"received"`
	Processed int64 `json:"processed"`
	// Errors counts user and system exceptions.
	Errors int64 `json:"errors"`
	// SinkTotals are a sink's operation counts, summed over its running
	// instances since each started; nil for a function.
	SinkTotals    *SinkTotals          `json:"sinkTotals,omitempty"`
	InstanceList  []InstanceStatus     `json:"instanceList"`
	Subscriptions []SubscriptionStatus `json:"subscriptions"`
}

// SinkTotals counts what a view's sink did with its operations.
type SinkTotals struct {
	Applied int64 `json:"applied"`
	// Skipped operations were recognised as redeliveries of operations the
	// row had applied.
	Skipped int64 `json:"skipped"`
	// Rejected operations can never apply and went to the dead-letter topic.
	Rejected int64 `json:"rejected"`
	// Expired operations were dropped from a windowed view: their tile had
	// expired (events older than its longest window and a hop).
	Expired int64 `json:"expired,omitempty"`
	// NewestEvent is the greatest event time among the operations
	// Cassandra confirmed to the running instances since each started;
	// zero when none has.
	NewestEvent time.Time `json:"newestEvent,omitzero"`
}

// InstanceStatus is one instance of a stage.
type InstanceStatus struct {
	ID        int    `json:"id"`
	Running   bool   `json:"running"`
	Restarts  int64  `json:"restarts"`
	Processed int64  `json:"processed"`
	Errors    int64  `json:"errors"`
	Error     string `json:"error,omitempty"`
}

// SubscriptionStatus is a stage's subscription on one input topic.
type SubscriptionStatus struct {
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	Exists       bool   `json:"exists"`
	// Backlog is how many messages wait to be acknowledged.
	Backlog int64 `json:"backlog"`
	// RateOut is the messages per second delivered lately.
	RateOut float64 `json:"rateOut"`
	// LastAcked is when a consumer last acknowledged, zero if never.
	LastAcked time.Time `json:"lastAcked,omitzero"`
}

// ViewStatus is one view's size and freshness.
type ViewStatus struct {
	View     string `json:"view"`
	Keyspace string `json:"keyspace"`
	// Table is the active table; ManifestTable the manifests' version.
	Table         string `json:"table"`
	ManifestTable string `json:"manifestTable"`
	// RowsEstimated is the estimated number of live rows of the active
	// table (package rowestimate: exact below 1000 rows, within a few
	// percent above; a windowed view's rows are its tiles); nil when it
	// could not be read.
	RowsEstimated *int64 `json:"rowsEstimated,omitempty"`
	// Rows is the number of live rows, counted by reading the whole
	// table: only for the views Options.CountRows names.
	Rows *int64 `json:"rows,omitempty"`
	// Versions are the table versions the registry lists, with their
	// state (active, building, retired, snapshot).
	Versions []VersionStatus `json:"versions"`
	// NewestEvent is the latest event time the view's sink confirmed since
	// its instances started (SinkTotals.NewestEvent; for a view counted
	// with CountRows, the latest time the table holds in its timestamp
	// and latest columns); zero when unknown. AgeSeconds is its age.
	NewestEvent time.Time `json:"newestEvent,omitzero"`
	AgeSeconds  *float64  `json:"ageSeconds,omitempty"`
	// LastApplied is when the sink last acknowledged an operation; Backlog
	// the operations waiting for it.
	LastApplied time.Time `json:"lastApplied,omitzero"`
	Backlog     int64     `json:"backlog"`
	// Skipped counts the operations the sink recognised as redeliveries,
	// Rejected those it sent to the dead-letter topic (over its running
	// instances, since each started); nil when the sink does not run.
	Skipped  *int64 `json:"skipped,omitempty"`
	Rejected *int64 `json:"rejected,omitempty"`
	Error    string `json:"error,omitempty"`
}

// VersionStatus is one table version of a view.
type VersionStatus struct {
	Table string `json:"table"`
	State string `json:"state"`
}

// NewCommand returns `foldline status`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "Show the deployed pipeline: instances, backlogs, view freshness",
		Long: `Show the pipeline of the manifests in DIR (default manifests/) as deployed: each
stage upstream first with its instances (running/wanted, restarts, processed, errors),
each subscription's backlog and rate, and each view's active table, estimated rows and
freshness (the newest event its sink confirmed, and when it last applied anything).
Rows are estimated from a read of at most 1000 rows per view (exact below that), so
the status costs the same whatever the tables' sizes; foldline views describe VIEW
counts one view's rows exactly.`,
		Example: "  foldline status\n  foldline status --watch\n  foldline status -o json --tenant shop-test",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			if opts.Interval <= 0 {
				return fmt.Errorf("--interval %s: want a positive duration: %w", opts.Interval, exitcode.ErrUsage)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, opts, asJSON)
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "print the status again every --interval until interrupted (on a terminal, in place)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 2*time.Second, "how often --watch reads the status")
	return cmd
}

// Run prints the report once, or with opts.Watch again and again until ctx
// ends: in place on a terminal, one after the other otherwise (with -o
// json, one JSON document per line).
func Run(ctx context.Context, opts Options, asJSON bool) error {
	src, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	defer src.Close()
	inPlace := opts.Watch && !asJSON && progress.IsTerminal(opts.Out)
	for {
		report, err := src.Report(ctx)
		if err != nil {
			if opts.Watch && ctx.Err() != nil {
				return nil // interrupted while reading: the watch is over
			}
			return err
		}
		switch {
		case asJSON && opts.Watch:
			if err := json.NewEncoder(opts.Out).Encode(report); err != nil {
				return fmt.Errorf("writing JSON: %w", err)
			}
		case asJSON:
			return target.WriteJSON(opts.Out, report)
		default:
			if inPlace {
				fmt.Fprint(opts.Out, "\x1b[H\x1b[2J") // home, clear
			}
			if opts.Watch {
				fmt.Fprintf(opts.Out, "%s, every %s (Ctrl-C stops)\n", report.At.Local().Format(time.TimeOnly), opts.Interval)
			}
			report.Write(opts.Out, opts.now())
		}
		if !opts.Watch {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Get gathers the report. An unknown tenant is an exitcode.ErrNotFound error.
func Get(ctx context.Context, opts Options) (*Report, error) {
	src, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return src.Report(ctx)
}

// Source reads one tenant's status again and again over one pair of
// connections (status --watch, foldline ui). It is safe for one goroutine
// at a time.
type Source struct {
	opts   Options
	set    *manifest.Set
	graph  *manifest.Graph
	pulsar *pulsarx.Clients
	cql    *gocql.Session
}

// Open reads the manifests and connects. An unknown tenant is an
// exitcode.ErrNotFound error.
func Open(ctx context.Context, opts Options) (*Source, error) {
	set, graph, err := opts.Target.LoadGraph(opts.Dir)
	if err != nil {
		return nil, err
	}
	pulsar, err := pulsarx.ConnectTenant(ctx, opts.Services, set.Tenant.Name)
	if err != nil {
		return nil, err
	}
	cql, err := cqlx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	return &Source{opts: opts, set: set, graph: graph, pulsar: pulsar, cql: cql}, nil
}

// Close closes the Cassandra session.
func (src *Source) Close() { cqlsession.Close(src.cql) }

// Tenant is the tenant whose status the source reads.
func (src *Source) Tenant() string { return src.set.Tenant.Name }

// Report gathers the report now.
func (src *Source) Report(ctx context.Context) (*Report, error) {
	set, graph, pulsar, cql := src.set, src.graph, src.pulsar, src.cql
	report := &Report{Tenant: set.Tenant.Name, Keyspace: set.Tenant.Keyspace}
	sinks := map[*manifest.View]StageStatus{}
	// A stage whose work a backfill's copy does for a view's active table
	// is shown under its manifest name, with the copy's function.
	carriers, err := deploy.ActiveCarriers(ctx, cql, set, graph)
	if err != nil {
		return nil, err
	}
	for _, st := range graph.Order {
		runs := st
		if c, ok := carriers[st.FullName()]; ok {
			runs = c
		}
		s, err := stageStatus(ctx, pulsar, graph, st, runs)
		if err != nil {
			return nil, err
		}
		report.Stages = append(report.Stages, s)
		if st.View != nil {
			sinks[st.View] = s
		}
	}
	now := src.opts.now()
	report.At = now.UTC()
	for _, v := range set.Views {
		report.Views = append(report.Views, viewStatus(ctx, cql, v, sinks[v], now, slices.Contains(src.opts.CountRows, v.Name)))
	}
	if report.Backfills, err = backfill.Running(ctx, pulsar, cql, set.Tenant.Keyspace); err != nil {
		return nil, err
	}
	if report.Backfills == nil {
		report.Backfills = []*backfill.Snapshot{}
	}
	return report, nil
}

// stageStatus is st's status, read from runs: the function that does st's
// work (st itself, or a backfill's copy of it).
func stageStatus(ctx context.Context, pulsar *pulsarx.Clients, graph *manifest.Graph, st, runs *manifest.Stage) (StageStatus, error) {
	s := StageStatus{Name: st.Name, FullName: st.FullName(), Kind: string(st.Kind), Instances: st.Parallelism, Upstream: []string{}}
	if runs.FullName() != st.FullName() {
		s.RunsAs = runs.FullName()
	}
	if st.View != nil {
		s.View = st.View.Name
	}
	for _, up := range graph.Upstream(st) {
		s.Upstream = append(s.Upstream, up.Name)
	}
	for _, in := range st.Inputs {
		if graph.Ledger[in] {
			s.Upstream = append(s.Upstream, "ledger")
		}
	}
	status, err := pulsar.Functions.GetFunctionStatusWithContext(ctx, runs.Tenant, runs.Namespace, runs.Name)
	switch {
	case pulsarx.IsNotFound(err):
	case err != nil:
		return s, fmt.Errorf("reading status of function %s: %w", runs.FullName(), err)
	default:
		s.Deployed = true
		for _, inst := range status.Instances {
			d := inst.Status
			errs := d.NumUserExceptions + d.NumSystemExceptions
			s.InstanceList = append(s.InstanceList, InstanceStatus{
				ID: inst.InstanceID, Running: d.Running, Restarts: d.NumRestarts,
				Processed: d.NumSuccessfullyProcessed, Errors: errs, Error: d.Err,
			})
			if d.Running {
				s.Running++
			}
			s.Restarts += d.NumRestarts
			s.Received += d.NumReceived
			s.Processed += d.NumSuccessfullyProcessed
			s.Errors += errs
		}
	}
	if s.Deployed && st.Kind == manifest.StageSink {
		totals, err := sinkTotals(ctx, pulsar, runs)
		if err != nil {
			return s, err
		}
		s.SinkTotals = totals
	}
	for _, in := range runs.Inputs {
		sub, err := subscriptionStatus(ctx, pulsar, in, runs.SubName)
		if err != nil {
			return s, err
		}
		s.Subscriptions = append(s.Subscriptions, sub)
	}
	return s, nil
}

// sinkTotals sums the sink's user metrics over its instances.
func sinkTotals(ctx context.Context, pulsar *pulsarx.Clients, st *manifest.Stage) (*SinkTotals, error) {
	stats, err := pulsar.Functions.GetFunctionStatsWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	if err != nil {
		return nil, fmt.Errorf("reading stats of sink %s: %w", st.FullName(), err)
	}
	var t SinkTotals
	for _, inst := range stats.Instances {
		m := inst.Metrics.UserMetrics
		t.Applied += int64(m[cassandra.MetricApplied])
		t.Skipped += int64(m[cassandra.MetricSkipped])
		t.Rejected += int64(m[cassandra.MetricRejected])
		t.Expired += int64(m[cassandra.MetricExpired])
		if newest := unixSeconds(m[cassandra.MetricNewestEventTime]); newest.After(t.NewestEvent) {
			t.NewestEvent = newest
		}
	}
	return &t, nil
}

// unixSeconds is a time in seconds since the epoch as a time, zero for 0.
func unixSeconds(s float64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s*1e9)).UTC()
}

func subscriptionStatus(ctx context.Context, pulsar *pulsarx.Clients, topic, sub string) (SubscriptionStatus, error) {
	s := SubscriptionStatus{Topic: topic, Subscription: sub}
	st, ok, err := pulsarx.Subscription(ctx, pulsar, topic, sub)
	if err != nil || !ok {
		return s, err
	}
	s.Exists = true
	s.Backlog = st.MsgBacklog
	s.RateOut = st.MsgRateOut
	if st.LastAckedTimestamp > 0 {
		s.LastAcked = time.UnixMilli(st.LastAckedTimestamp).UTC()
	}
	return s, nil
}

// viewStatus reads a view's status; count counts its rows by reading the
// whole table, where the status otherwise estimates them.
func viewStatus(ctx context.Context, cql *gocql.Session, v *manifest.View, sink StageStatus, now time.Time, count bool) (vs ViewStatus) {
	schema := v.Schema()
	vs = ViewStatus{View: v.Name, Keyspace: v.Keyspace, Table: schema.Table, ManifestTable: schema.Table, Versions: []VersionStatus{}}
	if t := sink.SinkTotals; t != nil {
		vs.Skipped, vs.Rejected = &t.Skipped, &t.Rejected
		vs.NewestEvent = t.NewestEvent
	}
	defer func() { // the newest event, whichever way it was read, and its age
		if !vs.NewestEvent.IsZero() {
			age := now.Sub(vs.NewestEvent).Seconds()
			vs.AgeSeconds = &age
		}
	}()
	for _, sub := range sink.Subscriptions {
		vs.Backlog += sub.Backlog
		if sub.LastAcked.After(vs.LastApplied) {
			vs.LastApplied = sub.LastAcked
		}
	}
	// The registry names the active table; a view not registered yet (not
	// deployed) has no table to read.
	entry, err := registry.Get(ctx, cql, v.Keyspace, v.Name)
	if err != nil || entry.ActiveTable == "" {
		vs.Table = ""
		if err != nil {
			vs.Error = err.Error()
		}
		return vs
	}
	vs.Table = entry.ActiveTable
	schema.Table = entry.ActiveTable
	for _, ver := range entry.Versions {
		vs.Versions = append(vs.Versions, VersionStatus{Table: ver.Table, State: ver.State})
	}
	for _, ver := range entry.Versions {
		if ver.Table == entry.ActiveTable && ver.Definition != "" {
			_ = json.Unmarshal([]byte(ver.Definition), &schema) // the manifests' columns are the fallback
		}
	}
	est, err := rowestimate.Of(ctx, cql, schema)
	if err != nil {
		vs.Error = err.Error()
		return vs
	}
	vs.RowsEstimated = &est.Rows
	if !count {
		return vs
	}
	sum, err := viewscan.Scan(ctx, cql, schema)
	if err != nil {
		vs.Error = err.Error()
		return vs
	}
	vs.Rows = &sum.Rows
	if !sum.NewestEvent.IsZero() {
		vs.NewestEvent = sum.NewestEvent
	}
	return vs
}

// count prints a count that may be unknown.
func count(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// Write prints the report as two tables: stages upstream first, then views.
// The errors of instances and sinks can quote events: they are escaped for
// the terminal (textcap.Line).
func (r *Report) Write(w io.Writer, now time.Time) {
	fmt.Fprintf(w, "tenant %s, keyspace %s\n\n", r.Tenant, r.Keyspace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tKIND\tAFTER\tRUNNING\tRESTARTS\tPROCESSED\tERRORS\tSUBSCRIPTION\tBACKLOG\tRATE/s")
	for _, s := range r.Stages {
		running := fmt.Sprintf("%d/%d", s.Running, s.Instances)
		if !s.Deployed {
			running = "not deployed"
		}
		after := strings.Join(s.Upstream, ",")
		name := s.Name
		if s.RunsAs != "" {
			name += " (as " + s.RunsAs[strings.LastIndex(s.RunsAs, "/")+1:] + ")"
		}
		for i, sub := range s.Subscriptions {
			backlog := fmt.Sprint(sub.Backlog)
			if !sub.Exists {
				backlog = "no subscription"
			}
			subName := sub.Subscription + "@" + shortTopic(sub.Topic)
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%.1f\n", name, s.Kind, after, running, s.Restarts, s.Processed, s.Errors, subName, backlog, sub.RateOut)
			} else {
				fmt.Fprintf(tw, "\t\t\t\t\t\t\t%s\t%s\t%.1f\n", subName, backlog, sub.RateOut)
			}
		}
		for _, inst := range s.InstanceList {
			if inst.Error != "" || !inst.Running {
				fmt.Fprintf(tw, "  instance %d\t\t\t%s\t%d\t%d\t%d\t%s\t\t\n", inst.ID, runningWord(inst.Running), inst.Restarts, inst.Processed, inst.Errors, textcap.Line(inst.Error))
			}
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VIEW\tTABLE\tROWS (ESTIMATED)\tBACKLOG\tNEWEST EVENT\tAGE\tLAST APPLIED\tSKIPPED\tREJECTED")
	for _, v := range r.Views {
		table := v.Keyspace + "." + v.Table
		if v.Table == "" {
			table = "not deployed"
		}
		newest, age := "-", "-"
		if !v.NewestEvent.IsZero() {
			newest = v.NewestEvent.Format(time.RFC3339)
			age = HumanAge(now.Sub(v.NewestEvent))
		}
		applied := "never"
		if !v.LastApplied.IsZero() {
			applied = HumanAge(now.Sub(v.LastApplied)) + " ago"
		}
		rows := count(v.RowsEstimated)
		if v.Rows != nil {
			rows = fmt.Sprintf("%d (counted)", *v.Rows)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.View, table, rows, v.Backlog, newest, age, applied, count(v.Skipped), count(v.Rejected))
		if v.Error != "" {
			fmt.Fprintf(tw, "  error\t%s\t\t\t\t\t\t\t\n", textcap.Line(v.Error))
		}
	}
	tw.Flush()
	for _, b := range r.Backfills {
		fmt.Fprintln(w)
		b.Write(w, false)
	}
}

func runningWord(running bool) string {
	if running {
		return "running"
	}
	return "stopped"
}

// shortTopic drops the persistent://tenant/ prefix.
func shortTopic(topic string) string {
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		return topic
	}
	return strings.TrimPrefix(tn.GetNamespace(), tn.GetTenant()+"/") + "/" + tn.GetLocalName()
}

// HumanAge prints an age the way status does: seconds under an hour,
// minutes under two days, then days.
func HumanAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
