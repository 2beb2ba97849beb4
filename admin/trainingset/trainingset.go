// Package trainingset is `foldline training-set`: for each row of a label
// file (entity keys, a label time, the label's own columns), the columns
// of one or more views exactly as serving would have returned them at that
// time. The views' paths run locally over one read of the ledger (package
// localrun: the deployed binaries), which keeps every operation on a
// labelled entity with its time; then one sweep per view (sweep) folds
// them with the sink's own fold (cassandra.MemTable) in the order of their
// time while it walks the labels in the order of theirs, reading each
// label's row as of its time (MemTable.AsOf: windows too) — no refold per
// label. Time is the ledger's publish time (what a replay with --until
// cuts by) or, with --time event, each event's own time. Entities with no
// event yet get nulls. Output: Parquet or CSV, by the file's extension.
package trainingset

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/progress"
	"github.com/foldline/foldline/sinks/cassandra"
)

// LabelTime is the label file's column of label times (RFC 3339).
const LabelTime = "label_time"

// The clocks a training set can cut by.
const (
	// TimePublish cuts by the ledger's publish time: exactly what the view
	// served at that moment.
	TimePublish = "publish"
	// TimeEvent cuts by each event's own time (the ledger event's event
	// time, its publish time when it has none): the view as if every event
	// had arrived on time, applied in the order of their times (ledger
	// order among equal ones). Only a column merged by set, and deletes,
	// depend on that order; a replay with --until-clock event applies the
	// same events in ledger order.
	TimeEvent = "event"
)

// Options are training-set's settings.
type Options struct {
	target.Command
	// Views are the views to join, in the order of their columns in the
	// output; at least one.
	Views []string
	// Labels is the label file; Output the training set to write.
	Labels string
	Output string
	// Time is TimePublish (default) or TimeEvent.
	Time string
	// Exclusive leaves out the events at exactly a label's time: only
	// those strictly before it count. By default they count.
	Exclusive bool
	// Force overwrites an existing Output (never the label file).
	Force    bool
	CacheDir string
}

// Result says what was written.
type Result struct {
	Out     string   `json:"out"`
	Views   []string `json:"views"`
	Labels  int      `json:"labels"`
	Written int      `json:"written"`
	Skipped []BadRow `json:"skipped"`
	// Events is how many ledger events were read.
	Events  int64   `json:"events"`
	Seconds float64 `json:"seconds"`
}

// BadRow is a label row that could not be used.
type BadRow struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// Refusals of --out, before anything is read (both exitcode.ErrUsage).
var (
	// ErrOutExists: --out names a file that exists, and --force is not set.
	ErrOutExists = errors.New("the output file exists")
	// ErrOutIsLabels: --out names the label file itself, --force or not.
	ErrOutIsLabels = errors.New("the output file is the label file")
)

// NewCommand returns `foldline training-set`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "training-set {VIEW | --view VIEW...} [DIR] --labels FILE.csv --out FILE.parquet|FILE.csv",
		Short: "Build a point-in-time training set: the views' columns as served at each label's time",
		Long: `For each row of the label file — a header naming the views' key columns and
` + LabelTime + ` (RFC 3339), then any label columns of your own — write the row with every
view's columns as serving returned them at the label's time, never a value from after it,
in one pass over the ledger through the views' own paths (the deployed binaries, run on
this machine) and the sink's own fold. Name one view as VIEW, or several with --view
(then DIR is the only argument): each view reads the label columns named as its key
columns, so views keyed differently (user, sku) join on a label file with both. With one
view the output columns are the view's; with several, each is <view>__<column>.

--time publish (default) cuts by the ledger's publish time, as a replay with --until does;
--time event by each event's own time (the events applied in that order). An event at
exactly a label's time counts; with --exclusive only those strictly before it do. A
windowed view gives each column's window as of the label's time, as serving does. An
entity with no event yet gets nulls. Bad label rows are reported with their line and left
out; the good ones are written. Parquet or CSV, by --out's extension; in CSV a text value
starting with = + - @, tab or carriage return is prefixed with ' (no formula in a
spreadsheet), numbers are not. An existing --out is refused without --force, and the label
file always.`,
		Example: "  foldline training-set user_activity --labels churn-labels.csv --out churn.parquet\n" +
			"  foldline training-set --view user_activity --view product_sales --labels labels.csv --out set.csv --time event\n" +
			"  foldline training-set user_activity --labels labels.csv --out set.csv --exclusive --force",
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var dirArgs []string
			switch {
			case len(opts.Views) == 0 && len(args) == 0:
				return fmt.Errorf("name a view: training-set VIEW, or --view VIEW (repeated): %w", exitcode.ErrUsage)
			case len(opts.Views) == 0:
				opts.Views, dirArgs = args[:1], args[1:]
			case len(args) > 1:
				return fmt.Errorf("with --view every view is given with --view, and the one argument is DIR (got %q): %w", args, exitcode.ErrUsage)
			default:
				dirArgs = args
				if len(args) == 1 {
					if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
						return fmt.Errorf("DIR %q is no directory (with --view, give every view with --view): %w", args[0], exitcode.ErrUsage)
					}
				}
			}
			asJSON, err := opts.Bind(cmd, dirArgs)
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return target.WriteJSON(opts.Command.Out, res)
			}
			for _, b := range res.Skipped {
				fmt.Fprintf(opts.ErrOut, "%s:%d: %s (row left out)\n", opts.Labels, b.Line, b.Reason)
			}
			fmt.Fprintf(opts.Command.Out, "%s: %d rows of %d labels (%d left out), %s, from %d ledger events in %.1f s\n",
				res.Out, res.Written, res.Labels, len(res.Skipped), viewsText(res.Views), res.Events, res.Seconds)
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringArrayVar(&opts.Views, "view", nil, "a view to join (repeat for several); instead of the VIEW argument")
	cmd.Flags().StringVar(&opts.Labels, "labels", "", "CSV file of labels: the views' key columns, "+LabelTime+", any other columns")
	cmd.Flags().StringVar(&opts.Output, "out", "", "the training set to write: a .parquet or .csv file (not an existing one without --force)")
	cmd.Flags().StringVar(&opts.Time, "time", TimePublish, "the clock of the label times: publish (the ledger's) or event (each event's own)")
	cmd.Flags().BoolVar(&opts.Exclusive, "exclusive", false, "count only the events strictly before a label's time (default: at or before)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing --out (never the label file)")
	return cmd
}

func viewsText(views []string) string {
	if len(views) == 1 {
		return "view " + views[0]
	}
	return "views " + strings.Join(views, ", ")
}

// label is one good label row.
type label struct {
	line   int
	fields []string // as in the file
	at     time.Time
	// keys is the entity's key in each view, rowKeys the same as
	// MemTable.RowKey gives it.
	keys    [][]any
	rowKeys []string
}

// view is one view of the training set.
type view struct {
	name   string
	schema cassandra.ViewSchema
	// keys names rows as the fold does; it holds no row.
	keys *cassandra.MemTable
	// lastLabel holds the time of the last label of each entity the
	// labels name (by MemTable.RowKey).
	lastLabel map[string]time.Time
	// ops are the view's operations on wanted entities, in ledger order.
	ops []timedOp
}

// Run builds the training set.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	switch opts.Time {
	case "":
		opts.Time = TimePublish
	case TimePublish, TimeEvent:
	default:
		return nil, fmt.Errorf("--time %q: want publish or event: %w", opts.Time, exitcode.ErrUsage)
	}
	if len(opts.Views) == 0 {
		return nil, fmt.Errorf("no view named: %w", exitcode.ErrUsage)
	}
	for i, v := range opts.Views {
		if slices.Contains(opts.Views[:i], v) {
			return nil, fmt.Errorf("view %s named twice: %w", v, exitcode.ErrUsage)
		}
	}
	format := strings.ToLower(filepath.Ext(opts.Output))
	if format != ".parquet" && format != ".csv" {
		return nil, fmt.Errorf("--out %q: want a .parquet or .csv file: %w", opts.Output, exitcode.ErrUsage)
	}
	if err := checkOut(opts.Output, opts.Labels, opts.Force); err != nil {
		return nil, err
	}
	job, err := localrun.OpenViews(ctx, opts.Command, opts.Views, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	views := make([]*view, len(job.Views))
	for i, v := range job.Views {
		schema := v.Schema()
		keys, err := cassandra.NewMemTable(schema)
		if err != nil {
			return nil, err
		}
		views[i] = &view{name: v.Name, schema: schema, keys: keys, lastLabel: map[string]time.Time{}}
	}
	columns := outputColumns(views)
	header, labels, bad, err := readLabels(opts.Labels, views, columns)
	if err != nil {
		return nil, err
	}
	res := &Result{Out: opts.Output, Views: opts.Views, Labels: len(labels) + len(bad), Skipped: bad}
	for _, l := range labels {
		for i, v := range views {
			if last, ok := v.lastLabel[l.rowKeys[i]]; !ok || l.at.After(last) {
				v.lastLabel[l.rowKeys[i]] = l.at
			}
		}
	}

	bar := progress.New(opts.ErrOut, "training set "+strings.Join(opts.Views, "+"), "ev", 0)
	if _, err := job.OverLedgerEach(ctx, func(batch []localrun.Message) {
		res.Events += int64(len(batch))
		bar.Set(res.Events)
	}, func(i int, op cassandra.Op, event localrun.Message) error {
		v := views[i] // called from view i's goroutine only
		entity, err := v.keys.EntityOf(op)
		if err != nil {
			return nil // a rejected operation changes no row
		}
		last, wanted := v.lastLabel[entity]
		if !wanted {
			return nil // no label reads its entity
		}
		at := event.PublishTime
		if opts.Time == TimeEvent && !event.EventTime.IsZero() {
			at = event.EventTime // without an event time of its own: its publish time, as a replay does
		}
		if opts.Time == TimePublish && at.After(last) {
			// After every label of its entity: no label reads it, and
			// the fold of the ones kept, in ledger order by publish time,
			// is the same without it (positions only grow along a topic,
			// so it makes no later one a redelivery). By event time the
			// sweep first folds them all in ledger order (sweepOne).
			return nil
		}
		v.ops = append(v.ops, timedOp{op: op, at: at, entity: entity})
		return nil
	}); err != nil {
		return nil, err
	}
	bar.Finish()

	sv := make([]sweepView, len(views))
	for i, v := range views {
		sv[i] = sweepView{schema: v.schema, ops: v.ops}
		v.ops = nil
	}
	sl := make([]sweepLabel, len(labels))
	for i, l := range labels {
		sl[i] = sweepLabel{at: l.at, keys: l.keys}
	}
	rows, err := sweep(sv, sl, opts.Exclusive)
	if err != nil {
		return nil, err
	}
	if err := writeSet(opts.Output, format, opts.Force, header, columns, labels, rows); err != nil {
		return nil, err
	}
	res.Written = len(labels)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// checkOut refuses an output file that is the label file, or that exists
// without force.
func checkOut(out, labels string, force bool) error {
	oi, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking --out %s: %w", out, err)
	}
	if li, err := os.Stat(labels); err == nil && os.SameFile(oi, li) {
		return fmt.Errorf("--out %s: %w %s (--force or not): %w", out, ErrOutIsLabels, labels, exitcode.ErrUsage)
	}
	if oi.IsDir() {
		return fmt.Errorf("--out %s is a directory: %w", out, exitcode.ErrUsage)
	}
	if !force {
		return fmt.Errorf("--out %s: %w (pass --force to overwrite it): %w", out, ErrOutExists, exitcode.ErrUsage)
	}
	return nil
}

// column is one view column of the output.
type column struct {
	view int
	// name is the view's, out the output's: the same with one view,
	// <view>__<name> with several.
	name, out, cqlType string
}

// outputColumns names the views' columns in the output: as they are with
// one view (as before there could be several); with several always
// <view>__<column>, so that a column's name does not depend on which other
// views are joined, nor on their column names.
func outputColumns(views []*view) []column {
	var cols []column
	for i, v := range views {
		for _, c := range v.schema.ReadColumns() { // averages included
			out := c.Name
			if len(views) > 1 {
				out = v.name + "__" + c.Name
			}
			cols = append(cols, column{view: i, name: c.Name, out: out, cqlType: c.Type})
		}
	}
	return cols
}

// readLabels reads the label file: the header, the good rows and the bad
// ones with their lines.
func readLabels(path string, views []*view, columns []column) ([]string, []label, []BadRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading labels: %w: %w", err, exitcode.ErrUsage)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = false
	header, err := r.Read()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the header of %s: %w: %w", path, err, exitcode.ErrUsage)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	keyCols := make([][]int, len(views))
	for vi, v := range views {
		for _, k := range v.schema.Key {
			i, ok := col[k.Name]
			if !ok {
				return nil, nil, nil, fmt.Errorf("%s:1: the header has no column %s (view %s's key is %s, then %s): %w", path, k.Name, v.name, keyNames(v.schema), LabelTime, exitcode.ErrUsage)
			}
			keyCols[vi] = append(keyCols[vi], i)
		}
	}
	timeCol, ok := col[LabelTime]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s:1: the header has no column %s: %w", path, LabelTime, exitcode.ErrUsage)
	}
	for _, c := range columns {
		if _, clash := col[c.out]; clash {
			return nil, nil, nil, fmt.Errorf("%s:1: column %s is a column of view %s's in the output too: rename it in the labels: %w", path, c.out, views[c.view].name, exitcode.ErrUsage)
		}
	}
	var labels []label
	var bad []BadRow
rows:
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var parseErr *csv.ParseError
		if errors.As(err, &parseErr) {
			bad = append(bad, BadRow{Line: parseErr.Line, Reason: parseErr.Err.Error()})
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading %s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		l := label{line: line, fields: rec, keys: make([][]any, len(views)), rowKeys: make([]string, len(views))}
		for vi, v := range views {
			text := make([]string, len(keyCols[vi]))
			for i, c := range keyCols[vi] {
				text[i] = rec[c]
			}
			k, err := v.keys.ParseKey(text)
			if err != nil {
				reason := err.Error()
				if len(views) > 1 {
					reason = "view " + v.name + ": " + reason
				}
				bad = append(bad, BadRow{Line: line, Reason: reason})
				continue rows
			}
			l.keys[vi], l.rowKeys[vi] = k, v.keys.RowKey(k)
		}
		if l.at, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(rec[timeCol])); err != nil {
			bad = append(bad, BadRow{Line: line, Reason: fmt.Sprintf("%s %q: want an RFC 3339 time such as 2026-11-01T12:00:00Z", LabelTime, rec[timeCol])})
			continue
		}
		labels = append(labels, l)
	}
	return header, labels, bad, nil
}

func keyNames(s cassandra.ViewSchema) string {
	names := make([]string, len(s.Key))
	for i, k := range s.Key {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}
