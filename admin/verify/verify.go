// Package verify is `foldline verify VIEW`: it folds the whole ledger
// through the view's path on this machine (the deployed function binaries
// run locally, package localrun, and the sink's own fold, a
// cassandra.MemTable, folds their operations), then compares every row with
// the live table. A row the live sink has taken further or not as far (its
// applied positions differ from the fold's) is counted as in flight, not
// as a difference: the pipeline keeps running while verify reads. With
// --every it runs again and again and exports the result as metrics.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/internal/promserve"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/textcap"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Options are verify's settings.
type Options struct {
	target.Command
	// View is the view to verify.
	View string
	// Sample, when above 0, compares only that many rows of the fold, read
	// one by one (rows only the live table has are then not looked for).
	Sample int
	// Examples bounds the examples of each kind of difference. Default 5.
	Examples int
	// CacheDir receives the built binaries. Default gobuild's.
	CacheDir string
}

// Result is one verification.
type Result struct {
	View  string `json:"view"`
	Table string `json:"table"`
	// Events is how many ledger events were folded.
	Events int64 `json:"events"`
	// Compared rows had the same applied positions in the fold and the
	// table; Consistent of them hold the same values.
	Compared   int `json:"compared"`
	Consistent int `json:"consistent"`
	// Missing rows are in the fold and not in the table, Extra rows the
	// other way round, Different ones in both with other values.
	Missing   int `json:"missing"`
	Extra     int `json:"extra"`
	Different int `json:"different"`
	// InFlight rows have other applied positions in the table: the live
	// pipeline is behind or ahead of the ledger as verify read it.
	InFlight int `json:"inFlight"`
	// Expired tiles of a windowed view are in the fold, which keeps
	// history, but gone or going from the table, which keeps the present
	// (they expire a window and a hop after their start): not compared.
	Expired int `json:"expiredTiles,omitempty"`
	// ConsistencyPercent is 100 × Consistent / (Compared + Missing + Extra).
	ConsistencyPercent float64   `json:"consistencyPercent"`
	Examples           []Example `json:"examples"`
	// DeadLetters counts the inputs the path's functions dead-lettered.
	DeadLetters map[string]int64 `json:"deadLetters"`
	Seconds     float64          `json:"seconds"`
}

// Example is one row that differs.
type Example struct {
	Kind  string         `json:"kind"`
	Key   string         `json:"key"`
	Fold  map[string]any `json:"fold,omitempty"`
	Table map[string]any `json:"table,omitempty"`
}

// ErrInconsistent is returned (with the result) when a row differs.
var ErrInconsistent = errors.New("the view differs from the fold of the ledger")

// NewCommand returns `foldline verify`.
func NewCommand() *cobra.Command {
	var opts Options
	var every time.Duration
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "verify VIEW [DIR]",
		Short: "Fold the ledger through a view's path here and compare it with the live table",
		Long: `Fold every event of the ledger through the path of VIEW (the manifests in DIR,
default manifests/) on this machine — the same function binaries as deployed, run
locally, and the sink's own fold — and compare each row with the view's active
table: consistency %, rows missing, extra or different (with examples), and rows in
flight (the live sink is behind or ahead of the ledger as verify read it). Exit code
1 when a row differs. --sample N compares N rows of the fold only. --every D runs
again every D and serves the results as Prometheus metrics on --metrics-listen.`,
		Example: "  foldline verify user_activity\n  foldline verify product_sales --sample 1000 -o json\n  foldline verify user_activity --every 1h --metrics-listen 127.0.0.1:9464",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args[1:])
			if err != nil {
				return err
			}
			opts.View = args[0]
			if metricsAddr != "" && every <= 0 {
				return fmt.Errorf("--metrics-listen serves the results of --every: set --every too: %w", exitcode.ErrUsage)
			}
			if every <= 0 {
				res, err := Run(cmd.Context(), opts)
				if res != nil {
					if werr := write(opts.Out, res, asJSON); werr != nil {
						return werr
					}
				}
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Schedule(ctx, opts, every, metricsAddr, func(res *Result, err error) {
				if res != nil {
					_ = write(opts.Out, res, asJSON)
				}
				if err != nil {
					fmt.Fprintln(opts.ErrOut, "verify:", err)
				}
			})
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().IntVar(&opts.Sample, "sample", 0, "compare only N rows of the fold (0: every row)")
	cmd.Flags().IntVar(&opts.Examples, "examples", 5, "examples of each kind of difference to show")
	cmd.Flags().DurationVar(&every, "every", 0, "verify again every D until interrupted (0: once)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-listen", "", "with --every: serve the results as Prometheus metrics on this address")
	return cmd
}

func write(w io.Writer, res *Result, asJSON bool) error {
	if asJSON {
		return target.WriteJSON(w, res)
	}
	res.Write(w)
	return nil
}

// Write prints the result readably.
func (r *Result) Write(w io.Writer) {
	fmt.Fprintf(w, "view %s (table %s): %d ledger events folded in %.1f s\n", r.View, r.Table, r.Events, r.Seconds)
	fmt.Fprintf(w, "consistency %.2f%%: %d rows compared, %d consistent, %d different, %d missing, %d extra; %d in flight\n",
		r.ConsistencyPercent, r.Compared, r.Consistent, r.Different, r.Missing, r.Extra, r.InFlight)
	if r.Expired > 0 {
		fmt.Fprintf(w, "%d expired tiles of the windowed view not compared (the table keeps the tiles of the last window and hop)\n", r.Expired)
	}
	for _, e := range r.Examples {
		// Keys and values are the events': escaped, so that none can
		// write on the terminal (textcap.Line).
		fmt.Fprintf(w, "  %s %s: fold %s, table %s\n", e.Kind, textcap.Line(e.Key), textcap.Line(fmt.Sprint(e.Fold)), textcap.Line(fmt.Sprint(e.Table)))
	}
	for _, stage := range slices.Sorted(maps.Keys(r.DeadLetters)) {
		fmt.Fprintf(w, "  %s dead-lettered %d events (as it does live)\n", stage, r.DeadLetters[stage])
	}
}

// Run verifies once. A difference returns the result and ErrInconsistent.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	job, err := localrun.Open(ctx, opts.Command, opts.View, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	v := job.View
	cql, err := cqlx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	defer cqlsession.Close(cql)
	entry, err := registry.Get(ctx, cql, v.Keyspace, v.Name)
	if err != nil {
		return nil, err
	}
	if entry.ActiveTable == "" {
		return nil, fmt.Errorf("view %s has no active table yet (deploy it, or wait for its backfill): %w", v.Name, exitcode.ErrNotFound)
	}
	schema := v.Schema()
	schema.Table = entry.ActiveTable
	fold, events, deadLetters, err := foldLedger(ctx, job, schema)
	if err != nil {
		return nil, err
	}
	res := &Result{View: v.Name, Table: v.Keyspace + "." + entry.ActiveTable, Events: events, DeadLetters: deadLetters, Examples: []Example{}}
	if err := compare(ctx, cql, schema, fold, opts, res); err != nil {
		return nil, err
	}
	if total := res.Compared + res.Missing + res.Extra; total > 0 {
		res.ConsistencyPercent = 100 * float64(res.Consistent) / float64(total)
	} else {
		res.ConsistencyPercent = 100
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Different+res.Missing+res.Extra > 0 {
		return res, fmt.Errorf("view %s: %d different, %d missing, %d extra rows: %w", v.Name, res.Different, res.Missing, res.Extra, ErrInconsistent)
	}
	return res, nil
}

// foldLedger runs the job's path over every ledger event there is now and
// folds its operations with the sink's fold.
func foldLedger(ctx context.Context, job *localrun.Job, schema cassandra.ViewSchema) (*cassandra.MemTable, int64, map[string]int64, error) {
	fold, err := cassandra.NewMemTable(schema)
	if err != nil {
		return nil, 0, nil, err
	}
	var events int64
	deadLetters, err := job.OverLedger(ctx, func(batch []localrun.Message) {
		events += int64(len(batch))
	}, func(op cassandra.Op, _ localrun.Message) error {
		// Every error of the fold is one the sink dead-letters live too
		// (counted in fold.Totals.Rejected).
		_, _ = fold.Apply(op)
		return nil
	})
	return fold, events, deadLetters, err
}

// compare compares the fold with the live table into res.
func compare(ctx context.Context, cql *gocql.Session, schema cassandra.ViewSchema, fold *cassandra.MemTable, opts Options, res *Result) error {
	examples := cmpOr(opts.Examples, 5)
	shown := map[string]int{}
	example := func(kind string, key []any, f, t *cassandra.MemRow) {
		if shown[kind] >= examples {
			return
		}
		shown[kind]++
		e := Example{Kind: kind, Key: keyText(key)}
		if f != nil {
			e.Fold = f.Values
		}
		if t != nil {
			e.Table = t.Values
		}
		res.Examples = append(res.Examples, e)
	}
	// A tile that expires within the minute may be gone by the time it is
	// read: compared are the tiles that live longer.
	horizon := time.Now().Add(time.Minute)
	expired := func(key []any) bool {
		if !schema.Windowed() {
			return false
		}
		start, _ := key[len(key)-1].(time.Time)
		return !start.Add(schema.Retention()).After(horizon)
	}
	check := func(f, t *cassandra.MemRow) {
		inFold, inTable := f != nil && !f.Deleted, t != nil && !t.Deleted
		switch {
		case f != nil && expired(f.Key), t != nil && expired(t.Key):
			res.Expired++
		case f != nil && t != nil && !maps.Equal(f.Applied, t.Applied):
			res.InFlight++
		case inFold && !inTable:
			res.Missing++
			example("missing", f.Key, f, nil)
		case inTable && !inFold:
			res.Extra++
			example("extra", t.Key, nil, t)
		case inFold:
			res.Compared++
			if cassandra.SameValues(*f, *t) {
				res.Consistent++
			} else {
				res.Different++
				example("different", f.Key, f, t)
			}
		}
	}
	if opts.Sample > 0 {
		rows := slices.Collect(fold.Rows())
		rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		for _, f := range rows[:min(opts.Sample, len(rows))] {
			t, found, err := cassandra.ReadRow(ctx, cql, schema, f.Key, gocql.LocalQuorum)
			if err != nil {
				return err
			}
			if !found {
				check(&f, nil)
				continue
			}
			check(&f, &t)
		}
		return nil
	}
	seen := map[string]bool{}
	for t, err := range cassandra.ScanTable(ctx, cql, schema, gocql.LocalQuorum) {
		if err != nil {
			return err
		}
		seen[fold.RowKey(t.Key)] = true
		if f, ok := fold.Row(t.Key); ok {
			check(&f, &t)
		} else {
			check(nil, &t)
		}
	}
	for f := range fold.Rows() {
		if !seen[fold.RowKey(f.Key)] {
			check(&f, nil)
		}
	}
	return nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// The metrics Schedule serves, each with label view.
const (
	// MetricConsistencyPercent is the share of compared rows that equal
	// the fold of the ledger.
	MetricConsistencyPercent = "foldline_verify_consistency_percent"
	// MetricRows counts the rows of the last verification, by label
	// outcome (consistent, different, missing, extra, in_flight).
	MetricRows = "foldline_verify_rows"
	// MetricLastRun is when the last verification ended.
	MetricLastRun = "foldline_verify_last_run_timestamp_seconds"
	// MetricErrors counts the verifications that could not run.
	MetricErrors = "foldline_verify_errors_total"
)

// MetricNames lists the metric names Schedule serves, for dashboards and
// their tests.
func MetricNames() []string {
	return []string{MetricConsistencyPercent, MetricRows, MetricLastRun, MetricErrors}
}

// Schedule verifies every interval until ctx ends, reporting each result,
// and serves the latest as Prometheus metrics on addr (when set). It
// listens on addr before the first verification and returns the error when
// it cannot (a port taken, a bad address): a scheduled verify without the
// metrics it was asked for would look healthy and report nothing.
func Schedule(ctx context.Context, opts Options, every time.Duration, addr string, report func(*Result, error)) error {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"view": opts.View}
	consistency := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricConsistencyPercent, Help: "The share of compared rows that equal the fold of the ledger.", ConstLabels: labels})
	rows := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricRows, Help: "Rows of the last verification, by outcome.", ConstLabels: labels}, []string{"outcome"})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastRun, Help: "When the last verification ended.", ConstLabels: labels})
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: MetricErrors, Help: "Verifications that could not run.", ConstLabels: labels})
	reg.MustRegister(consistency, rows, last, failures)
	if addr != "" {
		srv, err := promserve.Listen(addr, "--metrics-listen", reg)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	for {
		res, err := Run(ctx, opts)
		if res != nil {
			consistency.Set(res.ConsistencyPercent)
			for outcome, n := range map[string]int{"consistent": res.Consistent, "different": res.Different, "missing": res.Missing, "extra": res.Extra, "in_flight": res.InFlight} {
				rows.WithLabelValues(outcome).Set(float64(n))
			}
			last.SetToCurrentTime()
		} else if err != nil {
			failures.Inc()
		}
		report(res, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// keyText prints a key for examples.
func keyText(key []any) string {
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = fmt.Sprint(k)
	}
	return strings.Join(parts, ",")
}
