package views

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/internal/textcap"
)

// Column is one key or value column of a view, as the catalog shows it.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Merge is the value column's merge rule, "" for a key column.
	Merge string `json:"merge,omitempty"`
	// Aggregate and Value are how a declared view's events fold into the
	// column (count; sum of qty * price_cents), "" for other views'.
	Aggregate   string `json:"aggregate,omitempty"`
	Value       string `json:"value,omitempty"`
	Description string `json:"description,omitempty"`
}

// merge is the column's MERGE cell: its rule, and the aggregate that
// implies it for a declared view's column.
func (c Column) merge() string {
	switch {
	case c.Aggregate == "":
		return c.Merge
	case c.Value == "":
		return fmt.Sprintf("%s (%s)", c.Merge, c.Aggregate)
	}
	return fmt.Sprintf("%s (%s of %s)", c.Merge, c.Aggregate, c.Value)
}

// Catalog is what the manifests say of a view: what it holds, who owns it,
// its columns.
type Catalog struct {
	Description string   `json:"description,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Tags        []string `json:"tags"`
	Key         []Column `json:"key"`
	Columns     []Column `json:"columns"`
}

// catalogOf reads v's catalog.
func catalogOf(v *manifest.View) Catalog {
	c := Catalog{Description: v.Description, Owner: v.Owner, Tags: slices.Clone(v.Tags), Key: []Column{}, Columns: []Column{}}
	if c.Tags == nil {
		c.Tags = []string{}
	}
	for _, k := range v.Key {
		c.Key = append(c.Key, Column{Name: k.Name, Type: k.Type, Description: k.Description})
	}
	for _, col := range v.Columns {
		c.Columns = append(c.Columns, Column{Name: col.Name, Type: col.Type, Merge: string(col.Merge), Aggregate: string(col.Aggregate), Value: col.Value.String(), Description: col.Description})
	}
	return c
}

// matches reports whether word (lower case) is in the view's name or any
// of its catalog's texts.
func (c Catalog) matches(name, word string) bool {
	texts := []string{name, c.Description, c.Owner}
	texts = append(texts, c.Tags...)
	for _, col := range slices.Concat(c.Key, c.Columns) {
		texts = append(texts, col.Name, col.Description)
	}
	for _, t := range texts {
		if strings.Contains(strings.ToLower(t), word) {
			return true
		}
	}
	return false
}

// LineageStep is one stage on a view's path from the ledger: what it runs,
// what it reads and writes, and the steps that write its inputs.
type LineageStep struct {
	Stage  string `json:"stage"`
	Kind   string `json:"kind"`
	Binary string `json:"binary"`
	// Inputs are the topics it reads; Ledger those of them that are ledger
	// topics.
	Inputs []string `json:"inputs"`
	Ledger []string `json:"ledger,omitempty"`
	// Output is the topic it writes, or the view's table for the sink.
	Output   string        `json:"output"`
	Upstream []LineageStep `json:"upstream"`
}

// lineage is the path from the ledger to st: st and, recursively, the
// stages that write its inputs.
func lineage(graph *manifest.Graph, st *manifest.Stage) LineageStep {
	step := LineageStep{Stage: st.Name, Kind: string(st.Kind), Binary: st.Binary, Inputs: slices.Clone(st.Inputs), Output: st.Output, Upstream: []LineageStep{}}
	if st.View != nil {
		step.Output = st.View.Keyspace + "." + st.View.Table()
	}
	for _, in := range st.Inputs {
		if graph.Ledger[in] {
			step.Ledger = append(step.Ledger, in)
		}
	}
	for _, up := range graph.Upstream(st) {
		step.Upstream = append(step.Upstream, lineage(graph, up))
	}
	return step
}

// Description is `foldline views describe VIEW`: the catalog, the table
// versions, the freshness and the lineage of one view.
type Description struct {
	View     string `json:"view"`
	Keyspace string `json:"keyspace"`
	Catalog
	// ActiveTable is the table readers use (the registry's); ManifestTable
	// the manifests' version.
	ActiveTable   string                 `json:"activeTable"`
	ManifestTable string                 `json:"manifestTable"`
	Versions      []status.VersionStatus `json:"versions"`
	Rows          int64                  `json:"rows"`
	NewestEvent   time.Time              `json:"newestEvent,omitzero"`
	AgeSeconds    *float64               `json:"ageSeconds,omitempty"`
	LastApplied   time.Time              `json:"lastApplied,omitzero"`
	Backlog       int64                  `json:"backlog"`
	Error         string                 `json:"error,omitempty"`
	// Lineage is the view's sink and, upstream, every stage back to the
	// ledger, from the manifests.
	Lineage LineageStep `json:"lineage"`
	// History is each table version's history from the registry, newest
	// version first: the code that built it, the code changed under it in
	// place and where, the switches of readers.
	History []VersionHistory `json:"history"`
}

// ErrUnknownView is the error for a view the manifests do not declare.
var ErrUnknownView = errors.New("no such view")

// Describe gathers view's description from the manifests and the cluster.
func Describe(ctx context.Context, opts Options, view string) (*Description, error) {
	set, graph, err := opts.Target.LoadGraph(opts.Dir)
	if err != nil {
		return nil, err
	}
	v, err := set.ViewByName(view)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrUnknownView, err, exitcode.ErrNotFound)
	}
	d := &Description{View: v.Name, Keyspace: v.Keyspace, Catalog: catalogOf(v), ManifestTable: v.Table()}
	for _, st := range graph.Order {
		if st.View == v {
			d.Lineage = lineage(graph, st)
		}
	}
	// One view, read once: its rows are counted, not estimated.
	report, err := status.Get(ctx, status.Options{Command: opts.Command, CountRows: []string{v.Name}})
	if err != nil {
		return nil, err
	}
	for _, vs := range report.Views {
		if vs.View != v.Name {
			continue
		}
		d.ActiveTable, d.Versions = vs.Table, vs.Versions
		if vs.Rows != nil {
			d.Rows = *vs.Rows
		}
		d.NewestEvent, d.AgeSeconds, d.LastApplied, d.Backlog, d.Error = vs.NewestEvent, vs.AgeSeconds, vs.LastApplied, vs.Backlog, vs.Error
	}
	tables := make([]string, len(d.Versions))
	for i, ver := range d.Versions {
		tables[i] = ver.Table
	}
	if d.History, err = readHistory(ctx, opts.Command, v.Keyspace, v.Name, tables); err != nil {
		return nil, err
	}
	return d, nil
}

// Write prints the description readably. The manifests' texts and the
// sink's error are escaped for the terminal (textcap.Line): a tenant
// writes the one, events make the other.
func (d *Description) Write(w io.Writer, now time.Time) {
	fmt.Fprintf(w, "view %s (keyspace %s)\n", d.View, d.Keyspace)
	if d.Description != "" {
		fmt.Fprintf(w, "  %s\n", textcap.Lines(d.Description))
	}
	fmt.Fprintf(w, "owner: %s\ntags: %s\n\n", textcap.Line(orDash(d.Owner)), textcap.Line(orDash(strings.Join(d.Tags, ", "))))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tTYPE\tMERGE\tDESCRIPTION")
	for _, c := range d.Key {
		fmt.Fprintf(tw, "%s\t%s\t(key)\t%s\n", c.Name, c.Type, textcap.Line(c.Description))
	}
	for _, c := range d.Columns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Type, textcap.Line(c.merge()), textcap.Line(c.Description))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nactive table: %s (the manifests' version: %s)\n", orDash(d.ActiveTable), d.ManifestTable)
	for _, v := range d.Versions {
		fmt.Fprintf(w, "  %s  %s\n", v.Table, v.State)
	}
	fresh := "no event time"
	if d.AgeSeconds != nil {
		fresh = fmt.Sprintf("newest event %s (%s old)", d.NewestEvent.Format(time.RFC3339), status.HumanAge(time.Duration(*d.AgeSeconds*float64(time.Second))))
	}
	applied := "never"
	if !d.LastApplied.IsZero() {
		applied = status.HumanAge(now.Sub(d.LastApplied)) + " ago"
	}
	fmt.Fprintf(w, "rows: %d, backlog: %d, %s, last applied %s\n", d.Rows, d.Backlog, fresh, applied)
	if d.Error != "" {
		fmt.Fprintf(w, "error: %s\n", textcap.Line(d.Error))
	}
	writeHistory(w, d.History)
	fmt.Fprintln(w, "\nlineage (from the manifests), the view first:")
	writeLineage(w, d.Lineage, "  ")
}

func writeLineage(w io.Writer, s LineageStep, indent string) {
	fmt.Fprintf(w, "%s%s  ← %s %s (%s) reading %s\n", indent, s.Output, s.Kind, s.Stage, s.Binary, strings.Join(s.Inputs, ", "))
	for _, l := range s.Ledger {
		fmt.Fprintf(w, "%s  %s  (the ledger)\n", indent, l)
	}
	for _, up := range s.Upstream {
		writeLineage(w, up, indent+"  ")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDescribeCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "describe VIEW [DIR]",
		Short: "Show a view: what it holds, its owner, columns, table versions, freshness and lineage",
		Long: `Show one view of the manifests in DIR (default manifests/): its description, owner
and tags, each column with its CQL type, merge rule and description, the active table
and every table version with its state, its rows and freshness, and its lineage — the
sink and every function and topic back to the ledger.`,
		Example: "  foldline views describe user_activity\n  foldline views describe product_sales -o json",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args[1:])
			if err != nil {
				return err
			}
			d, err := Describe(cmd.Context(), opts, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return target.WriteJSON(opts.Out, d)
			}
			d.Write(opts.Out, time.Now())
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	return cmd
}
