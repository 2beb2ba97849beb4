// Package trainingset is `foldline training-set VIEW`: for each row of a
// label file (an entity's key, a label time, the label's own columns), the
// view's columns exactly as serving would have returned them at that time,
// computed in one pass over the ledger with the view's own path run
// locally (package localrun: the deployed binaries) and the sink's own
// fold (cassandra.MemTable). Time is the ledger's publish time (what a
// replay with --until cuts by) or, with --time event, each event's own
// time. Rows whose entity did not exist yet get nulls. Output: Parquet or
// CSV, by the file's extension.
package trainingset

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/parquet-go/parquet-go"
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
	// time): the view as if every event had arrived on time.
	TimeEvent = "event"
)

// Options are training-set's settings.
type Options struct {
	target.Command
	View string
	// Labels is the label file; Output the training set to write.
	Labels string
	Output string
	// Time is TimePublish (default) or TimeEvent.
	Time     string
	CacheDir string
}

// Result says what was written.
type Result struct {
	Out     string   `json:"out"`
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

// NewCommand returns `foldline training-set`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "training-set VIEW [DIR] --labels FILE.csv --out FILE.parquet|FILE.csv",
		Short: "Build a point-in-time training set: the view's columns as served at each label's time",
		Long: `For each row of the label file — a header naming the view's key columns and
` + LabelTime + ` (RFC 3339), then any label columns of your own — write the row with the view's
columns as serving returned them at the label's time, never a value from after it, in
one pass over the ledger through the view's own path (the deployed binaries, run on
this machine) and the sink's own fold. --time publish (default) cuts by the ledger's
publish time, as a replay with --until does; --time event by each event's own time.
An entity with no event yet gets nulls. Bad label rows are reported with their line
and left out; the good ones are written. Parquet or CSV, by --out's extension.`,
		Example: "  foldline training-set user_activity --labels churn-labels.csv --out churn.parquet\n  foldline training-set user_activity --labels labels.csv --out set.csv --time event",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args[1:])
			if err != nil {
				return err
			}
			opts.View = args[0]
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
			fmt.Fprintf(opts.Command.Out, "%s: %d rows of %d labels (%d left out), from %d ledger events in %.1f s\n",
				res.Out, res.Written, res.Labels, len(res.Skipped), res.Events, res.Seconds)
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Labels, "labels", "", "CSV file of labels: the view's key columns, "+LabelTime+", any other columns")
	cmd.Flags().StringVar(&opts.Output, "out", "", "the training set to write: a .parquet or .csv file")
	cmd.Flags().StringVar(&opts.Time, "time", TimePublish, "the clock of the label times: publish (the ledger's) or event (each event's own)")
	return cmd
}

// label is one good label row.
type label struct {
	line   int
	fields []string // as in the file
	key    []any
	rowKey string
	at     time.Time
}

// recorded is one operation on a labelled row, with its event's times.
type recorded struct {
	op          cassandra.Op
	publishTime time.Time
	eventTime   time.Time
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
	format := strings.ToLower(filepath.Ext(opts.Output))
	if format != ".parquet" && format != ".csv" {
		return nil, fmt.Errorf("--out %q: want a .parquet or .csv file: %w", opts.Output, exitcode.ErrUsage)
	}
	job, err := localrun.Open(ctx, opts.Command, opts.View, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	v := job.View
	schema := v.Schema()
	// keys names rows as the fold does; it holds no row.
	keys, err := cassandra.NewMemTable(schema)
	if err != nil {
		return nil, err
	}
	header, labels, bad, err := readLabels(opts.Labels, schema, keys)
	if err != nil {
		return nil, err
	}
	res := &Result{Out: opts.Output, Labels: len(labels) + len(bad), Skipped: bad}
	wanted := map[string]bool{}
	for _, l := range labels {
		wanted[l.rowKey] = true
	}

	ops := map[string][]recorded{}
	bar := progress.New(opts.ErrOut, "training set "+v.Name, "ev", 0)
	if _, err := job.OverLedger(ctx, func(batch []localrun.Message) {
		res.Events += int64(len(batch))
		bar.Set(res.Events)
	}, func(op cassandra.Op, event localrun.Message) error {
		key, err := keys.KeyOf(op)
		if err != nil || !wanted[key] {
			return nil // a rejected operation changes no row; an unlabelled row is not needed
		}
		eventTime := event.EventTime
		if eventTime.IsZero() {
			eventTime = event.PublishTime // no event time of its own: its publish time, as a replay does
		}
		ops[key] = append(ops[key], recorded{op: op, publishTime: event.PublishTime, eventTime: eventTime})
		return nil
	}); err != nil {
		return nil, err
	}
	bar.Finish()

	w, err := newWriter(opts.Output, format, header, schema)
	if err != nil {
		return nil, err
	}
	for _, l := range labels {
		row, err := asOf(schema, ops[l.rowKey], l, opts.Time)
		if err != nil {
			w.abort()
			return nil, err
		}
		if err := w.write(l, row); err != nil {
			w.abort()
			return nil, err
		}
		res.Written++
	}
	if err := w.close(); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// asOf folds a row's operations up to the label's time, in ledger order.
func asOf(schema cassandra.ViewSchema, ops []recorded, l label, clock string) (*cassandra.MemRow, error) {
	m, err := cassandra.NewMemTable(schema)
	if err != nil {
		return nil, err
	}
	for _, r := range ops {
		at := r.publishTime
		if clock == TimeEvent {
			at = r.eventTime
		}
		if at.After(l.at) {
			if clock == TimePublish {
				break // the ledger is in publish order: nothing later is earlier
			}
			continue
		}
		_, _ = m.Apply(r.op) // a rejected operation changes nothing, live too
	}
	row, ok := m.Row(l.key)
	if !ok || row.Deleted {
		return nil, nil
	}
	return &row, nil
}

// readLabels reads the label file: the header, the good rows and the bad
// ones with their lines.
func readLabels(path string, schema cassandra.ViewSchema, keys *cassandra.MemTable) ([]string, []label, []BadRow, error) {
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
	var keyCols []int
	for _, k := range schema.Key {
		i, ok := col[k.Name]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%s:1: the header has no column %s (the view's key is %s, then %s): %w", path, k.Name, keyNames(schema), LabelTime, exitcode.ErrUsage)
		}
		keyCols = append(keyCols, i)
	}
	timeCol, ok := col[LabelTime]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s:1: the header has no column %s: %w", path, LabelTime, exitcode.ErrUsage)
	}
	for _, c := range schema.Columns {
		if _, clash := col[c.Name]; clash {
			return nil, nil, nil, fmt.Errorf("%s:1: column %s is a column of view %s too: rename it in the labels: %w", path, c.Name, schema.View, exitcode.ErrUsage)
		}
	}
	var labels []label
	var bad []BadRow
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
		key := make([]string, len(keyCols))
		for i, c := range keyCols {
			key[i] = rec[c]
		}
		k, err := keys.ParseKey(key)
		if err != nil {
			bad = append(bad, BadRow{Line: line, Reason: err.Error()})
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(rec[timeCol]))
		if err != nil {
			bad = append(bad, BadRow{Line: line, Reason: fmt.Sprintf("%s %q: want an RFC 3339 time such as 2026-11-01T12:00:00Z", LabelTime, rec[timeCol])})
			continue
		}
		labels = append(labels, label{line: line, fields: rec, key: k, rowKey: keys.RowKey(k), at: at})
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

// writer writes the training set's rows.
type writer struct {
	path    string
	file    *os.File
	header  []string
	schema  cassandra.ViewSchema
	csv     *csv.Writer
	parquet *parquet.Writer
}

func newWriter(path, format string, header []string, schema cassandra.ViewSchema) (*writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("writing the training set: %w", err)
	}
	w := &writer{path: path, file: f, header: header, schema: schema}
	if format == ".csv" {
		w.csv = csv.NewWriter(f)
		cols := slices.Clone(header)
		for _, c := range schema.Columns {
			cols = append(cols, c.Name)
		}
		if err := w.csv.Write(cols); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing the training set: %w", err)
		}
		return w, nil
	}
	group := parquet.Group{}
	for _, h := range header {
		if h == LabelTime {
			// As precise as given: a label may fall between two events of
			// one millisecond.
			group[h] = parquet.Timestamp(parquet.Nanosecond)
		} else {
			group[h] = parquet.String()
		}
	}
	for _, c := range schema.Columns {
		group[c.Name] = parquet.Optional(parquetNode(c.Type))
	}
	w.parquet = parquet.NewWriter(f, parquet.NewSchema("training_set", group))
	return w, nil
}

// parquetNode is the Parquet type of a view column's CQL type.
func parquetNode(cqlType string) parquet.Node {
	switch strings.ToLower(cqlType) {
	case "bigint", "int", "smallint", "tinyint":
		return parquet.Int(64)
	case "double", "float":
		return parquet.Leaf(parquet.DoubleType)
	case "boolean":
		return parquet.Leaf(parquet.BooleanType)
	case "timestamp":
		return parquet.Timestamp(parquet.Millisecond)
	}
	return parquet.String() // text, varchar, ascii, uuid
}

func (w *writer) write(l label, row *cassandra.MemRow) error {
	if w.csv != nil {
		rec := slices.Clone(l.fields)
		for _, c := range w.schema.Columns {
			rec = append(rec, csvValue(row, c.Name))
		}
		return w.csv.Write(rec)
	}
	m := map[string]any{}
	for i, h := range w.header {
		if h == LabelTime {
			m[h] = l.at
		} else {
			m[h] = l.fields[i]
		}
	}
	for _, c := range w.schema.Columns {
		m[c.Name] = parquetValue(row, c.Name)
	}
	return w.parquet.Write(m)
}

func csvValue(row *cassandra.MemRow, col string) string {
	if row == nil {
		return ""
	}
	v, ok := row.Values[col]
	if !ok {
		return ""
	}
	if t, isTime := v.(time.Time); isTime {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func parquetValue(row *cassandra.MemRow, col string) any {
	if row == nil {
		return nil
	}
	v, ok := row.Values[col]
	if !ok {
		return nil
	}
	if u, isUUID := v.(gocql.UUID); isUUID {
		return u.String()
	}
	return v
}

func (w *writer) close() error {
	var err error
	if w.csv != nil {
		w.csv.Flush()
		err = w.csv.Error()
	} else {
		err = w.parquet.Close()
	}
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the training set %s: %w", w.path, err)
	}
	return nil
}

// abort removes a half-written file.
func (w *writer) abort() {
	w.file.Close()
	os.Remove(w.path)
}
