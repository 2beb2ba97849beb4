package backfill

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/promserve"
	"github.com/foldline/foldline/admin/manifest"
)

// NewCommand returns `foldline backfill`.
func NewCommand() *cobra.Command {
	var (
		opts                 Options
		watch, abort, detach bool
		metricsAddr          string
	)
	cmd := &cobra.Command{
		Use:   "backfill VIEW [DIR]",
		Short: "Rebuild a view from the whole ledger into a new table, then switch to it",
		Long: `Run the path from the ledger to VIEW over all history, as declared in the manifests
in DIR (default manifests/): the stages whose code (binary or config) changed, and
every stage downstream of them, are deployed under new function, subscription and
topic names (suffix -bf-<table>) with position Earliest, writing into a new table
version (<view>_v<N+1>, registered as building), while the current version keeps
serving. The unchanged stages upstream are shared, not copied: the copy reads their
output topics, kept from the first event, from the earliest (--copy-all copies them
too).

Progress (per stage: ledger entries done out of the ledger's size at the start, rate,
ETA, backlog) goes to stderr, or as JSON lines to stdout with -o json. When every stage
has caught up, the old and new tables are compared (rows only in the old, only in the
new, differing, a few examples) and the view registry switches the active table in one
write. The old table's path keeps following the ledger for --grace (the view's rollbackGrace, 24h by
default), so that a rollback (foldline views --activate TABLE) finds it up to date;
after that its functions are retired at the next deploy, backfill or foldline views
gc, and the table stays, as it was, for --keep-old.

The backfill survives the CLI: --detach starts it and exits, foldline status shows it,
--watch takes it over (and switches when it has caught up), --abort removes it.
--metrics-listen ADDR serves the progress as Prometheus metrics while the command runs
(per stage: entries done and expected, backlog, events processed, dead letters; for a
fused run, the ledger events read); foldline metrics exports every running backfill. A fused
run (on this machine, before the copy is deployed) checkpoints into the backfill's
record the ledger positions whose view operations the table has (with the keys' states
of its stateful functions, saved into the copy's state tables): when its CLI dies,
foldline backfill VIEW (or --watch) resumes it from there once its heartbeat has
stopped.

--until WHEN makes it a replay: the view as it was at WHEN (a time: the events the
ledger received up to it; or a position, from a row's fl_applied or a dead letter's
origin: the events up to it) is built into its own table the same way; once every stage
has caught up, the replay's functions and topics are removed and the table stays,
registered as a snapshot (foldline views lists it; query it with CQL). The view is
not switched.`,
		Example: `  foldline backfill product_sales
  foldline backfill user_activity --require-identical --tenant shop-test
  foldline backfill product_sales --detach && foldline backfill --watch product_sales -o json
  foldline backfill --abort product_sales
  foldline backfill user_activity --until 2026-11-30T12:00:00Z`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.View = args[0]
			var err error
			if opts.JSON, err = opts.Bind(cmd, args[1:]); err != nil {
				return err
			}
			opts.GraceSet = cmd.Flags().Changed("grace")
			if n := countTrue(watch, abort, detach); n > 1 {
				return fmt.Errorf("--watch, --abort and --detach exclude each other: %w", exitcode.ErrUsage)
			}
			if opts.MaxRate < 0 {
				return fmt.Errorf("--max-rate %d: want events per second, or 0 for no limit: %w", opts.MaxRate, exitcode.ErrUsage)
			}
			if metricsAddr != "" && !abort {
				opts.Progress = &Progress{}
				reg := prometheus.NewRegistry()
				reg.MustRegister(opts.Progress)
				srv, err := promserve.Listen(metricsAddr, "--metrics-listen", reg)
				if err != nil {
					return err
				}
				defer srv.Close()
				fmt.Fprintf(opts.ErrOut, "serving the progress as Prometheus metrics on http://%s/metrics\n", srv.Addr)
			}
			var result any
			switch {
			case abort:
				result, err = Abort(cmd.Context(), opts)
			case detach:
				var rec *backfillrecord.Record
				if rec, err = Start(cmd.Context(), opts); err == nil {
					fmt.Fprintf(opts.ErrOut, "started; follow it with foldline backfill --watch %s\n", rec.View)
				}
				result = rec
			default:
				var res *Result
				if res, err = Run(cmd.Context(), opts, watch); res != nil {
					result = res
				}
			}
			if err != nil {
				return err
			}
			if opts.JSON {
				return json.NewEncoder(opts.Out).Encode(result)
			}
			if res, ok := result.(*Result); ok && res.Until != "" {
				fmt.Fprintf(opts.Out, "View %s as of %s is in table %s (the view still reads %s); %d replay resources removed.\n", res.View, res.Until, res.Table, orNone(res.OldTable), len(res.Retired))
			} else if ok {
				fmt.Fprintf(opts.Out, "View %s switched to %s (was %s); %d old resources retired.\n", res.View, res.Table, orNone(res.OldTable), len(res.Retired))
			}
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	opts.RegisterBuildFlags(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&watch, "watch", false, "take over the view's running backfill: show its progress and switch when caught up")
	f.BoolVar(&abort, "abort", false, "remove the view's running backfill (functions, topics, new table); the active table stays")
	f.BoolVar(&detach, "detach", false, "start the backfill and exit (foldline status shows it, --watch takes it over)")
	f.BoolVar(&opts.RequireIdentical, "require-identical", false, "fail instead of switching when the new table differs from the old one")
	f.Int64Var(&opts.Threshold, "threshold", 0, "backlog (entries) under which a stage counts as caught up")
	f.DurationVar(&opts.KeepOld, "keep-old", 7*24*time.Hour, "how long the old table is kept for a rollback after the switch")
	f.DurationVar(&opts.Grace, "grace", manifest.DefaultRollbackGrace, "how long the old table keeps following the ledger after the switch, so that a rollback (foldline views --activate) finds it up to date (default: the view's rollbackGrace, else 24h; 0 stops it at the switch)")
	f.DurationVar(&opts.Timeout, "timeout", 0, "stop watching after this long (the backfill goes on); 0 watches until caught up")
	f.DurationVar(&opts.Wait, "wait", 5*time.Minute, "how long to wait for the new functions' instances to run")
	f.StringVar(&opts.UntilClock, "until-clock", ClockPublish, "what a time given to --until cuts by: publish (the ledger's publish time: the view as served then; a replay early in the ledger stops reading there) or event (each event's own time; the whole ledger is read)")
	f.StringVar(&opts.Engine, "engine", EngineAuto, "how the copy catches up with the ledger: deployed (the functions worker runs the copy from the ledger's first event), fused (this machine runs the copy's path over the ledger first, every function in a local process and no topic in between, the sink's code writing the table, then deploys the copy from there), cluster (as fused, but the functions worker runs it as one function, which resumes from its checkpoint when restarted and needs this machine only to start it and to deploy the copy after it: every function of the path must be a one-line main), or auto (fused for a ledger of at least "+fmt.Sprint(fusedFromEntries)+" entries, where it measured faster)")
	f.StringVar(&metricsAddr, "metrics-listen", "", "serve the progress as Prometheus metrics on this address while the command runs (foldline metrics exports every running backfill too)")
	f.BoolVar(&opts.CopyAll, "copy-all", false, "copy every stage of the view's path, the unchanged ones upstream too (by default a stage whose code is the manifests' and whose output is kept from the first event is shared, not run twice)")
	f.IntVar(&opts.MaxRate, "max-rate", 0, "read at most this many ledger events per second in a fused or cluster run, to leave the cluster room for the live pipeline (0: as fast as it can; the deployed engine ignores it)")
	f.DurationVar(&opts.Checkpoint, "checkpoint", 0, "how often a fused run writes its checkpoint and heartbeat into the backfill's record (a run whose CLI died is resumed from it by the next foldline backfill VIEW or --watch); default 2s, and 10s for the checkpoint of a path with a stateful function, which saves its keys' states")
	f.StringVar(&opts.Until, "until", "", "replay the view as of a point of the ledger into its own table, kept as a snapshot and never switched: an RFC 3339 time (events published up to it) or a ledger position ledger:entry[:batch] (up to it, inclusive)")
	return cmd
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
