// Package views is `foldline views`: each view of a keyspace with its active
// table (from the view registry that deploy writes and a backfill switches),
// its other table versions, the active table's row count and the view's
// catalog (what the manifests say it holds, its owner, tags and columns);
// `views --search` finds views by those, and `views describe` shows one
// with its freshness and its lineage back to the ledger.
package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gocql/gocql"
	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/internal/viewscan"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/textcap"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Options are views's settings.
type Options struct {
	// Command's Dir is read for the keyspace when Target.Keyspace is empty.
	target.Command
	// Activate, when set, makes this table its view's active one (a
	// rollback to a table a backfill replaced, or forward again) before
	// listing.
	Activate string
	// Drop, when set, removes this table version from the registry and
	// drops it (a snapshot, or a retired version no longer needed for a
	// rollback) before listing. The active table, and one a running
	// backfill builds, are refused.
	Drop string
	// Search, when set, lists only the views whose name or catalog
	// (description, owner, tags, columns) holds it, ignoring case.
	Search string
	// Stale lets Activate make active a version whose functions were
	// retired (it no longer follows the ledger).
	Stale bool
	// Grace is how long the version Activate switches away from keeps
	// following the ledger (GraceSet false: the view manifest's
	// rollbackGrace, else manifest.DefaultRollbackGrace).
	Grace    time.Duration
	GraceSet bool
}

// View is one view's line of output.
type View struct {
	View     string `json:"view"`
	Keyspace string `json:"keyspace"`
	// Table is the active table.
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
	// Versions are every table of the view with its state (active,
	// building, retired, snapshot).
	Versions []Version `json:"versions"`
	// Catalog is what the manifests say of the view (description, owner,
	// tags) with its columns and their types; without manifests
	// (--keyspace), the columns of the registered definition.
	Catalog
}

// Version is one table version of a view.
type Version struct {
	Table string `json:"table"`
	State string `json:"state"`
}

// NewCommand returns `foldline views`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "views [DIR]",
		Short: "List the views: keyspace, active table, row count",
		Long: `List the views registered in the tenant's keyspace (from the manifests in DIR,
default manifests/, or --keyspace) with their active table, row count and other
table versions. With -o json: an array of objects with view, keyspace, table (the
active one), rows and versions. --activate TABLE switches its view to it (a rollback);
--drop TABLE drops a version readers do not use (a snapshot from foldline backfill
--until, a retired version).`,
		Example: "  foldline views\n  foldline views --keyspace shop -o json\n  foldline views --activate user_activity_v1\n  foldline views --drop user_activity_v3",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			if opts.Activate != "" && opts.Drop != "" {
				return fmt.Errorf("--activate and --drop exclude each other: %w", exitcode.ErrUsage)
			}
			if opts.Drop != "" {
				view, err := Drop(cmd.Context(), opts)
				if err != nil {
					return err
				}
				fmt.Fprintf(opts.ErrOut, "dropped %s (a version of view %s)\n", opts.Drop, view)
			}
			opts.GraceSet = cmd.Flags().Changed("grace")
			if opts.Activate != "" {
				view, previous, err := Activate(cmd.Context(), opts)
				if err != nil {
					return err
				}
				fmt.Fprintf(opts.ErrOut, "view %s now reads %s (was %s)\n", view, opts.Activate, previous)
			}
			list, err := List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return target.WriteJSON(opts.Out, list)
			}
			tw := tabwriter.NewWriter(opts.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VIEW\tKEYSPACE\tTABLE\tROWS\tVERSIONS\tOWNER\tDESCRIPTION")
			for _, v := range list {
				versions := ""
				for i, ver := range v.Versions {
					if i > 0 {
						versions += ", "
					}
					versions += ver.Table + " (" + ver.State + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.View, v.Keyspace, v.Table, v.Rows, versions, textcap.Line(orDash(v.Owner)), textcap.Line(abbreviate(v.Description, 60)))
			}
			return tw.Flush()
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Activate, "activate", "", "make TABLE its view's active table (a rollback after a backfill: up to date while in the rollback grace; refused once its functions were retired, unless --stale)")
	cmd.Flags().BoolVar(&opts.Stale, "stale", false, "with --activate: activate a version whose functions were retired, as it is (it follows the ledger no more)")
	cmd.Flags().DurationVar(&opts.Grace, "grace", manifest.DefaultRollbackGrace, "with --activate: how long the version switched away from keeps following the ledger (default: the view's rollbackGrace, else 24h)")
	cmd.Flags().StringVar(&opts.Drop, "drop", "", "drop TABLE, a version of a view that readers do not use (a snapshot, a retired version), and forget it")
	cmd.Flags().StringVar(&opts.Search, "search", "", "list only the views whose name, description, owner, tags or columns hold WORD")
	cmd.AddCommand(newDescribeCommand(), newGCCommand())
	return cmd
}

// abbreviate cuts s to n runes with an ellipsis.
func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Activate switches the view that owns opts.Activate to that table in one
// registry write, and returns the view and the table active before. A table
// a running backfill is building is refused, and so is a retired one whose
// functions were retired (it follows the ledger no more: ErrStale) unless
// opts.Stale. The registry's history records the switch; the table
// switched away from keeps following the ledger for the rollback grace.
func Activate(ctx context.Context, opts Options) (view, previous string, err error) {
	t, err := opts.find(ctx, opts.Activate)
	if err != nil {
		return "", "", err
	}
	defer cqlsession.Close(t.cql)
	view = t.entry.View
	if t.version.State == registry.StateAborting {
		return "", "", fmt.Errorf("activating %s.%s: foldline backfill --abort is removing it: %w: %w", t.keyspace, opts.Activate, ErrInUse, exitcode.ErrUsage)
	}
	if t.version.State == registry.StateBuilding {
		return "", "", fmt.Errorf("activating %s.%s: a backfill of %s is still building it, readers would see it half full (it switches by itself once caught up: foldline backfill --watch %s): %w: %w",
			t.keyspace, opts.Activate, view, view, ErrInUse, exitcode.ErrUsage)
	}
	history, err := registry.History(ctx, t.cql, t.keyspace, view)
	if err != nil {
		return "", "", err
	}
	if t.version.State == registry.StateRetired && t.entry.ActiveTable != opts.Activate && !opts.Stale {
		if err := staleness(t.keyspace, view, opts.Activate, history[opts.Activate]); err != nil {
			return "", "", err
		}
	}
	previous, err = registry.Activate(ctx, t.cql, t.keyspace, view, opts.Activate)
	if err != nil || previous == opts.Activate {
		return view, previous, err
	}
	grace, err := opts.grace(view)
	if err != nil {
		return view, previous, err
	}
	if err := registry.Ensure(ctx, t.cql, t.keyspace); err != nil {
		return view, previous, err
	}
	now := time.Now().UTC()
	if err := registry.Record(ctx, t.cql, t.keyspace, view, opts.Activate, registry.Event{At: now, Kind: registry.EventActivated, By: "views --activate"}); err != nil {
		return view, previous, err
	}
	if previous != "" {
		err = registry.Record(ctx, t.cql, t.keyspace, view, previous, registry.Event{At: now, Kind: registry.EventDeactivated, By: "views --activate", Until: now.Add(grace)})
	}
	return view, previous, err
}

// ErrStale is the error for activating a version that no longer follows
// the ledger.
var ErrStale = errors.New("table is stale")

// staleness refuses table, a retired version of view, when its history
// says its functions were retired (or does not say they still run: it was
// switched away from before Foldline recorded rollback graces).
func staleness(keyspace, view, table string, events []registry.Event) error {
	following, known := registry.Following(events)
	if following {
		return nil
	}
	why := "it was switched away from before Foldline recorded whether a version's functions keep running, and they were most likely retired then"
	if known {
		stopped := events[len(events)-1]
		for _, ev := range slices.Backward(events) {
			if ev.Kind == registry.EventStopped {
				stopped = ev
				break
			}
		}
		why = fmt.Sprintf("its functions were retired at %s, when its rollback grace was over", stopped.At.UTC().Format(time.RFC3339))
		if len(stopped.Positions) > 0 {
			why += positionsLine(": it holds the view up to about ledger position ", stopped.Positions)
		}
	}
	return fmt.Errorf("activating %s.%s: it is stale — %s, and it follows the ledger no more, so readers would get old rows. Rebuild the view from the whole ledger with foldline backfill %s (with the manifests of the code you want: it builds a new version and switches to it once caught up), or pass --stale to activate it as it is: %w: %w",
		keyspace, table, why, view, ErrStale, exitcode.ErrUsage)
}

// grace is how long the version switched away from keeps following the
// ledger: opts.Grace when set, else the view manifest's (when the
// manifests are at hand), else the default.
func (o Options) grace(view string) (time.Duration, error) {
	if o.GraceSet {
		return o.Grace, nil
	}
	if o.Target.Keyspace != "" {
		return manifest.DefaultRollbackGrace, nil
	}
	set, err := o.Target.Load(o.Dir)
	if err != nil {
		return 0, err
	}
	if v, err := set.ViewByName(view); err == nil {
		return v.Grace(), nil
	}
	return manifest.DefaultRollbackGrace, nil
}

// ErrInUse is the error for dropping a table that is active or being built,
// and for activating one being built.
var ErrInUse = errors.New("table in use")

// Drop removes opts.Drop from the registry, then drops it, and returns its
// view. The active table (checked again at the drop, registry.Drop) and a
// table in state building (a running backfill fills it: foldline backfill
// --abort removes that) are refused.
func Drop(ctx context.Context, opts Options) (string, error) {
	t, err := opts.find(ctx, opts.Drop)
	if err != nil {
		return "", err
	}
	defer cqlsession.Close(t.cql)
	view := t.entry.View
	switch {
	case t.entry.ActiveTable == opts.Drop:
		return "", fmt.Errorf("dropping %s.%s: view %s reads it (activate another version first): %w: %w", t.keyspace, opts.Drop, view, ErrInUse, exitcode.ErrUsage)
	case t.version.State == registry.StateBuilding:
		return "", fmt.Errorf("dropping %s.%s: a backfill of %s is building it (foldline backfill --abort %s removes it): %w: %w", t.keyspace, opts.Drop, view, view, ErrInUse, exitcode.ErrUsage)
	}
	if err := registry.Drop(ctx, t.cql, t.keyspace, view, opts.Drop); err != nil {
		if errors.Is(err, registry.ErrActiveTable) { // activated since it was looked up
			return "", fmt.Errorf("%w: %w: %w", err, ErrInUse, exitcode.ErrUsage)
		}
		return "", err
	}
	return view, nil
}

// registered is a table version found in the registry, with the session
// that found it (the caller closes it).
type registered struct {
	cql      *gocql.Session
	keyspace string
	entry    registry.Entry
	version  registry.Version
}

// find looks table up in the registry of the keyspace the options name; an
// unknown table is an exitcode.ErrNotFound error.
func (o Options) find(ctx context.Context, table string) (*registered, error) {
	keyspace, err := o.keyspace()
	if err != nil {
		return nil, err
	}
	cql, err := cqlx.Connect(o.Services)
	if err != nil {
		return nil, err
	}
	entry, version, err := registry.FindTable(ctx, cql, keyspace, table)
	if err != nil {
		cqlsession.Close(cql)
		if errors.Is(err, registry.ErrUnknownTable) {
			return nil, fmt.Errorf("%w: %w", err, exitcode.ErrNotFound)
		}
		return nil, err
	}
	return &registered{cql: cql, keyspace: keyspace, entry: entry, version: version}, nil
}

func (o Options) keyspace() (string, error) {
	keyspace, _, err := o.keyspaceAndManifests()
	return keyspace, err
}

// keyspaceAndManifests returns the keyspace and, unless --keyspace names
// one without manifests, the manifests.
func (o Options) keyspaceAndManifests() (string, *manifest.Set, error) {
	if o.Target.Keyspace != "" {
		return o.Target.Keyspace, nil, o.Target.CheckKeyspace()
	}
	set, err := o.Target.Load(o.Dir)
	if err != nil {
		return "", nil, err
	}
	return set.Tenant.Keyspace, set, nil
}

// List returns the registered views. A keyspace without a registry is an
// exitcode.ErrNotFound error.
func List(ctx context.Context, opts Options) ([]View, error) {
	keyspace, set, err := opts.keyspaceAndManifests()
	if err != nil {
		return nil, err
	}
	cql, err := cqlx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	defer cqlsession.Close(cql)
	exists, err := registry.Exists(ctx, cql, keyspace)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("keyspace %s has no views (no %s table): deploy the manifests first with foldline deploy: %w", keyspace, registry.Table, exitcode.ErrNotFound)
	}
	entries, err := registry.List(ctx, cql, keyspace)
	if err != nil {
		return nil, err
	}
	list := []View{}
	for _, e := range entries {
		v := View{View: e.View, Keyspace: keyspace, Table: e.ActiveTable, Versions: []Version{}}
		var schema cassandra.ViewSchema
		for _, ver := range e.Versions {
			v.Versions = append(v.Versions, Version{Table: ver.Table, State: ver.State})
			if ver.Table == e.ActiveTable {
				if err := json.Unmarshal([]byte(ver.Definition), &schema); err != nil {
					return nil, fmt.Errorf("reading the registered definition of %s.%s: %w", keyspace, ver.Table, err)
				}
			}
		}
		v.Catalog = registeredCatalog(schema)
		if set != nil {
			if mv, err := set.ViewByName(e.View); err == nil {
				v.Catalog = catalogOf(mv)
			}
		}
		if opts.Search != "" && !v.Catalog.matches(v.View, strings.ToLower(opts.Search)) {
			continue
		}
		if e.ActiveTable != "" {
			schema.Keyspace, schema.Table = keyspace, e.ActiveTable
			sum, err := viewscan.Scan(ctx, cql, schema)
			if err != nil {
				return nil, err
			}
			v.Rows = sum.Rows
		}
		list = append(list, v)
	}
	return list, nil
}

// registeredCatalog is the catalog of a registered definition: its
// columns, without the manifests' texts.
func registeredCatalog(schema cassandra.ViewSchema) Catalog {
	c := Catalog{Tags: []string{}, Key: []Column{}, Columns: []Column{}}
	for _, k := range schema.Key {
		c.Key = append(c.Key, Column{Name: k.Name, Type: k.Type})
	}
	for _, col := range schema.Columns {
		c.Columns = append(c.Columns, Column{Name: col.Name, Type: col.Type, Merge: string(col.Merge)})
	}
	return c
}
