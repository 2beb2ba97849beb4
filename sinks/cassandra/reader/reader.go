// Package reader is how applications read a Foldline view: it resolves the
// view's active table through the view registry (never a hard-coded
// user_activity_v1, which a backfill replaces), follows a switch within a
// refresh interval, hides deleted rows (the sink keeps a deleted row as
// a tombstone with its positions, marked fl_deleted), and computes the
// view's averages from their stored sum and count.
//
// The same in CQL, for readers in other languages:
//
//	SELECT active_table, definition FROM shop.foldline_views WHERE view_name = 'user_activity' LIMIT 1;
//	SELECT "user", page_views, …, fl_deleted FROM shop.user_activity_v1 WHERE "user" = ?;
//	-- a row whose fl_deleted is true does not exist; read active_table again now and then.
//	-- an average (the definition's averages) is its sum over its count, null for a count of 0:
//	SELECT qty_avg_sum / qty_avg_count FROM … -- CQL's / on a double and a bigint gives a double
//
// A View is safe for concurrent use.
package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/sinks/cassandra"
)

// DefaultRegistry is the view registry's table, which foldline deploy
// creates in each tenant's keyspace.
const DefaultRegistry = "foldline_views"

// Options tune a View. The zero value is the defaults.
type Options struct {
	// Registry is the view registry's table. Default DefaultRegistry.
	Registry string
	// Refresh is how old the known active table may get before a read
	// looks in the registry again. Default 5s.
	Refresh time.Duration
	// Consistency of the reads. Default LOCAL_QUORUM, which sees every
	// write the sink made at LOCAL_QUORUM.
	Consistency gocql.Consistency
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Row is one row of a view: column name to value, as gocql decodes them
// (text as string, bigint as int64, timestamp as time.Time, …).
type Row map[string]any

// ErrNoActiveTable is returned while the registry names no active table for
// the view (it is not deployed, or a first backfill still builds it).
var ErrNoActiveTable = errors.New("view has no active table")

// View reads one view.
type View struct {
	session  *gocql.Session
	keyspace string
	view     string
	opts     Options

	mu      sync.Mutex
	table   table
	checked time.Time
}

// table is the active table and its definition.
type table struct {
	name    string
	schema  cassandra.ViewSchema
	columns []string // key, values, fl_deleted
}

// Open resolves view's active table in keyspace; session is the caller's.
func Open(ctx context.Context, session *gocql.Session, keyspace, view string, opts Options) (*View, error) {
	if opts.Registry == "" {
		opts.Registry = DefaultRegistry
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.Consistency == 0 {
		opts.Consistency = gocql.LocalQuorum
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, name := range []struct{ what, v string }{{"keyspace", keyspace}, {"registry", opts.Registry}} {
		if err := cqlname.Check(name.what, name.v); err != nil {
			return nil, err
		}
	}
	v := &View{session: session, keyspace: keyspace, view: view, opts: opts}
	if err := v.Refresh(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// Table returns the active table as last read from the registry.
func (v *View) Table() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.table.name
}

// Refresh reads the registry now.
func (v *View) Refresh(ctx context.Context) error {
	var active, definition string
	q := fmt.Sprintf(`SELECT active_table FROM %s WHERE view_name = ? LIMIT 1`, cqlname.Table(v.keyspace, v.opts.Registry))
	if err := v.session.Query(q, v.view).WithContext(ctx).Consistency(v.opts.Consistency).Scan(&active); err != nil {
		if errors.Is(err, gocql.ErrNotFound) {
			return fmt.Errorf("reading view %s in %s.%s: %w", v.view, v.keyspace, v.opts.Registry, ErrNoActiveTable)
		}
		return fmt.Errorf("reading view %s in %s.%s: %w", v.view, v.keyspace, v.opts.Registry, err)
	}
	if active == "" {
		return fmt.Errorf("reading view %s in %s.%s: %w", v.view, v.keyspace, v.opts.Registry, ErrNoActiveTable)
	}
	v.mu.Lock()
	same := v.table.name == active
	v.mu.Unlock()
	if !same {
		q = fmt.Sprintf(`SELECT definition FROM %s WHERE view_name = ? AND table_name = ?`, cqlname.Table(v.keyspace, v.opts.Registry))
		if err := v.session.Query(q, v.view, active).WithContext(ctx).Consistency(v.opts.Consistency).Scan(&definition); err != nil {
			return fmt.Errorf("reading the definition of %s.%s: %w", v.keyspace, active, err)
		}
		t := table{name: active}
		if err := json.Unmarshal([]byte(definition), &t.schema); err != nil {
			return fmt.Errorf("reading the definition of %s.%s: %w", v.keyspace, active, err)
		}
		for _, k := range t.schema.Key {
			t.columns = append(t.columns, k.Name)
		}
		for _, c := range t.schema.Columns {
			t.columns = append(t.columns, c.Name)
		}
		t.columns = append(t.columns, cassandra.ColumnDeleted)
		v.mu.Lock()
		v.table = t
		v.mu.Unlock()
	}
	v.mu.Lock()
	v.checked = v.opts.Now()
	v.mu.Unlock()
	return nil
}

// current returns the active table, reading the registry again when the
// last read is older than the refresh interval.
func (v *View) current(ctx context.Context) (table, error) {
	v.mu.Lock()
	stale := v.opts.Now().Sub(v.checked) >= v.opts.Refresh
	v.mu.Unlock()
	if stale {
		if err := v.Refresh(ctx); err != nil {
			return table{}, err
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.table, nil
}

// selectList is the quoted column list of t.
func (t table) selectList() string {
	quoted := make([]string, len(t.columns))
	for i, c := range t.columns {
		quoted[i] = cqlname.Quote(c)
	}
	return strings.Join(quoted, ", ")
}

// ErrNotWindowed is returned by GetAt for a view without windows: its table
// holds the present only (foldline replay --until builds the past).
var ErrNotWindowed = errors.New("view has no windows")

// GetAt returns a windowed view's row with the key as of the time at: each
// column combines the entity's tiles of its own window ending with at's
// tile (cassandra.ViewSchema.CombineTiles: counts and sums add, min and
// max, latest by event time), as
//
//	SELECT sum(purchases_7d) FROM shop.user_purchases_7d_v1
//	 WHERE "user" = ? AND fl_tile >= ? AND fl_tile <= ?  -- [T - 7d, T], T = at's tile start
//
// and an average, its window's sum over its count (null for a count of 0):
//
//	SELECT sum(qty_avg_7d_sum) / sum(qty_avg_7d_count) FROM … WHERE … -- the same range
//
// The table holds the tiles of the present (older ones expire), and a tile
// holds every event of its hop applied so far: for an at in the past the
// last tile includes events after at. Values are of the canonical Go types
// (int64 for every integer type, float64, string, bool, time.Time). found
// is false when no window of the entity holds an event.
func (v *View) GetAt(ctx context.Context, at time.Time, key ...any) (row Row, found bool, err error) {
	t, err := v.current(ctx)
	if err != nil {
		return nil, false, err
	}
	if !t.schema.Windowed() {
		return nil, false, fmt.Errorf("reading view %s as of %s: %w", v.view, at.Format(time.RFC3339), ErrNotWindowed)
	}
	var longest cassandra.Span
	for _, c := range t.schema.Columns {
		longest = max(longest, c.Window)
	}
	from, to := cassandra.WindowTiles(at, longest, t.schema.Hop.Duration())
	tiles, err := cassandra.ReadTiles(ctx, v.session, t.schema, key, from, to, v.opts.Consistency)
	if err != nil {
		return nil, false, fmt.Errorf("reading view %s: %w", v.view, err)
	}
	values := t.schema.CombineTiles(tiles, at)
	if len(values) == 0 {
		return nil, false, nil
	}
	row = Row(values)
	for i, k := range t.schema.Key {
		row[k.Name] = key[i]
	}
	return row, true, nil
}

// Get returns the row with the key (one value per key column, in order);
// found is false for a row that does not exist or was deleted. For a
// windowed view it is GetAt the present.
func (v *View) Get(ctx context.Context, key ...any) (row Row, found bool, err error) {
	t, err := v.current(ctx)
	if err != nil {
		return nil, false, err
	}
	if t.schema.Windowed() {
		return v.GetAt(ctx, v.opts.Now(), key...)
	}
	if len(key) != len(t.schema.Key) {
		return nil, false, fmt.Errorf("reading view %s: %d key values for %d key columns", v.view, len(key), len(t.schema.Key))
	}
	where := make([]string, len(t.schema.Key))
	for i, k := range t.schema.Key {
		where[i] = cqlname.Quote(k.Name) + " = ?"
	}
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s`, t.selectList(), cqlname.Table(v.keyspace, t.name), strings.Join(where, " AND "))
	m := map[string]any{}
	if err := v.session.Query(q, key...).WithContext(ctx).Consistency(v.opts.Consistency).MapScan(m); err != nil {
		if errors.Is(err, gocql.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading view %s from %s.%s: %w", v.view, v.keyspace, t.name, err)
	}
	return t.visible(m)
}

// All yields every row of the view that is not deleted, in token order.
func (v *View) All(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		t, err := v.current(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		q := fmt.Sprintf(`SELECT %s FROM %s`, t.selectList(), cqlname.Table(v.keyspace, t.name))
		it := v.session.Query(q).WithContext(ctx).Consistency(v.opts.Consistency).PageSize(1000).Iter()
		for {
			m := map[string]any{}
			if !it.MapScan(m) {
				break
			}
			row, ok, _ := t.visible(m)
			if ok && !yield(row, nil) {
				it.Close()
				return
			}
		}
		if err := it.Close(); err != nil {
			yield(nil, fmt.Errorf("reading view %s from %s.%s: %w", v.view, v.keyspace, t.name, err))
		}
	}
}

// visible drops the bookkeeping column, hides a deleted row and adds the
// view's averages (sum / count, absent for a count of 0).
func (t table) visible(m map[string]any) (Row, bool, error) {
	if deleted, _ := m[cassandra.ColumnDeleted].(bool); deleted {
		return nil, false, nil
	}
	delete(m, cassandra.ColumnDeleted)
	t.schema.AddAverages(m)
	return Row(m), true, nil
}
