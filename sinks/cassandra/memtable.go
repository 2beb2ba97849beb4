package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
)

// MemTable is a view folded in memory with the sink's own bind and fold
// code — the merge rules, the exactly-once positions, the epochs — so that
// it holds what the sink would write to Cassandra for the same operations.
// foldline verify compares it with the live table; training sets read it
// as of each label's time. It is not safe for concurrent use.
type MemTable struct {
	view *compiledView
	rows map[string]*memRow
	// tiles holds a windowed view's rows (tiles) by entity key.
	tiles map[string][]*memRow
	// Totals counts the operations applied, skipped and rejected.
	Totals Totals
	// known remembers the keys bind decoded last, by their JSON: a row's
	// operations keep coming, and its key need not be decoded and made
	// into a row key for each.
	known *bindArena
}

type memRow struct {
	key   []any
	state *rowState
}

// MemRow is one row of a view: its key values (in key column order), its
// value columns by name (absent: null), the last applied position per
// origin topic, and whether it is deleted (a tombstone).
type MemRow struct {
	// Key is the table's key: a windowed view's ends with the tile start.
	Key     []any
	Values  map[string]any
	Applied map[string]envelope.Position
	Deleted bool
	// LatestAt is the event time of each latest column's value.
	LatestAt map[string]time.Time
}

// NewMemTable returns an empty table of the view.
func NewMemTable(schema ViewSchema) (*MemTable, error) {
	v, err := compileView(schema, 1<<20)
	if err != nil {
		return nil, err
	}
	return &MemTable{view: v, rows: map[string]*memRow{}, tiles: map[string][]*memRow{}, known: &bindArena{rows: map[string]boundKey{}}}, nil
}

// Apply folds one operation. An error is the sink's for an operation it
// would dead-letter (errors.Is ErrWrongView, ErrBadValue, ErrEpochChanged…).
func (m *MemTable) Apply(op Op) (applied bool, err error) {
	if len(m.known.rows) >= internLimit {
		// As the interner: the keys in use again are remembered again,
		// and a table of a million rows (tiles) does not keep two keys
		// for each.
		clear(m.known.rows)
	}
	b, err := m.view.bind(0, op, m.known)
	if err != nil {
		m.Totals.Rejected++
		return false, err
	}
	r, ok := m.rows[b.rowKey]
	if !ok {
		r = &memRow{key: b.key, state: newRowState(len(m.view.colTypes))}
		m.rows[b.rowKey] = r
		if m.view.windowed {
			entity := keyString(b.key[:len(b.key)-1])
			m.tiles[entity] = insertTile(m.tiles[entity], r)
		}
	}
	applied, err = m.view.fold(r.state, b)
	switch {
	case err != nil:
		m.Totals.Rejected++
	case applied:
		m.Totals.Applied++
	default:
		m.Totals.Skipped++
	}
	return applied, err
}

// Len is the number of rows, tombstones included.
func (m *MemTable) Len() int { return len(m.rows) }

// Row returns the row with the key (from ParseKey, or as Rows gives it).
func (m *MemTable) Row(key []any) (MemRow, bool) {
	r, ok := m.rows[keyString(key)]
	if !ok {
		return MemRow{}, false
	}
	return m.view.memRow(r.key, r.state), true
}

// AsOf returns the entity's row as serving reads it at the time at: for a
// windowed view the tiles of each column's window combined
// (ViewSchema.CombineTiles), with the entity's key; for any other view the
// row itself; both with the view's averages (ViewSchema.AddAverages).
// found is false when the entity has no row (no tile at all).
// Only the tiles some column's window as of at reaches are read: asked at
// each of many times (a training set's labels), its cost is that of a
// window, not of the entity's whole history.
func (m *MemTable) AsOf(key []any, at time.Time) (row MemRow, found bool) {
	if !m.view.windowed {
		row, found = m.Row(key)
		if found {
			m.view.schema.AddAverages(row.Values)
		}
		return row, found
	}
	rows := m.tiles[keyString(key)]
	if len(rows) == 0 {
		return MemRow{}, false
	}
	last := TileStart(at, m.view.hop)
	first := last.Add(-(m.view.retention - m.view.hop)) // the longest window
	lo, _ := slices.BinarySearchFunc(rows, first, compareTileStart)
	hi, found := slices.BinarySearchFunc(rows, last, compareTileStart)
	if found {
		hi++
	}
	tiles := make([]Tile, 0, hi-lo)
	for _, r := range rows[lo:hi] {
		tiles = append(tiles, m.view.tile(r))
	}
	return MemRow{Key: key, Values: m.view.schema.CombineTiles(tiles, at)}, true
}

// EntityOf returns the key, as RowKey gives it, of the entity op is on:
// its row's (KeyOf) for a view without windows, for a windowed view the
// entity whose tile it is on (what AsOf takes); an error for an operation
// the sink would reject.
func (m *MemTable) EntityOf(op Op) (string, error) {
	b, err := m.view.bind(0, op, nil)
	if err != nil {
		return "", err
	}
	if m.view.windowed {
		return keyString(b.key[:len(b.key)-1]), nil
	}
	return b.rowKey, nil
}

// insertTile adds a new tile row to an entity's, which are in order of
// their start: most often at the end, events coming roughly in time order.
func insertTile(rows []*memRow, r *memRow) []*memRow {
	start := tileStartOf(r)
	if len(rows) == 0 || tileStartOf(rows[len(rows)-1]).Before(start) {
		return append(rows, r)
	}
	i, _ := slices.BinarySearchFunc(rows, start, compareTileStart)
	return slices.Insert(rows, i, r)
}

func tileStartOf(r *memRow) time.Time { return r.key[len(r.key)-1].(time.Time) }

func compareTileStart(r *memRow, t time.Time) int { return tileStartOf(r).Compare(t) }

// tile is a windowed view's row as a Tile.
func (v *compiledView) tile(r *memRow) Tile {
	t := Tile{Start: tileStartOf(r), Values: make(map[string]any, len(v.schema.Columns)), LatestAt: r.state.latestAt}
	for i, c := range v.schema.Columns {
		if r.state.values[i] != nil {
			t.Values[c.Name] = r.state.values[i]
		}
	}
	return t
}

// Rows yields every row, tombstones included, in no particular order.
func (m *MemTable) Rows() iter.Seq[MemRow] {
	return func(yield func(MemRow) bool) {
		for _, r := range m.rows {
			if !yield(m.view.memRow(r.key, r.state)) {
				return
			}
		}
	}
}

// ParseKey reads a row key given as text, one value per key column (a
// label file's entity key): a text column takes the text as it is, any
// other column the text as JSON (42, true, "2026-11-01T00:00:00Z").
func (m *MemTable) ParseKey(text []string) ([]any, error) {
	if len(text) != len(m.view.schema.Key) {
		return nil, fmt.Errorf("%w: %d key values for the key columns %s", ErrBadKey, len(text), m.view.keyNames())
	}
	key := make([]any, len(text))
	for i, t := range m.view.keyTypes[:len(text)] {
		raw := json.RawMessage(text[i])
		if t.name == "text" || t.name == "ascii" {
			quoted, _ := json.Marshal(text[i])
			raw = quoted
		}
		v, err := t.decode(raw)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", m.view.schema.Key[i].Name, err)
		}
		key[i] = v
	}
	return key, nil
}

// KeyOf returns the key, as RowKey gives it, of the row op is on; an
// error for an operation the sink would reject.
func (m *MemTable) KeyOf(op Op) (string, error) {
	b, err := m.view.bind(0, op, nil)
	if err != nil {
		return "", err
	}
	return b.rowKey, nil
}

// RowKey is a row's key values as one string, as KeyOf gives it.
func (m *MemTable) RowKey(key []any) string { return keyString(key) }

// keyString is a row's key as one string: what rows are grouped and
// cached by.
func keyString(key []any) string {
	var buf [internMaxBytes]byte
	b := buf[:0]
	for _, v := range key {
		switch x := v.(type) {
		case string:
			b = strconv.AppendQuote(b, x)
		case int64:
			b = append(strconv.AppendInt(append(b, '"'), x, 10), '"')
		case time.Time:
			// The instant, whatever its location; and a windowed view's
			// tile start in each of its keys without fmt's formatting.
			b = strconv.AppendInt(append(b, 't'), x.UnixNano(), 10)
		default:
			b = strconv.AppendQuote(b, fmt.Sprint(v))
		}
		b = append(b, ',')
	}
	if s, ok := rowKeys.lookup(b); ok {
		return s
	}
	s := string(b)
	rowKeys.store(b, s)
	return s
}

// rowKeys interns the row keys keyString makes: a row's operations keep
// coming, and its key need not be allocated for each.
var rowKeys = newInterner[string]()

func (v *compiledView) memRow(key []any, s *rowState) MemRow {
	r := MemRow{Key: key, Values: map[string]any{}, Applied: maps.Clone(s.applied), Deleted: s.deleted, LatestAt: maps.Clone(s.latestAt)}
	for i, c := range v.schema.Columns {
		if s.values[i] != nil {
			r.Values[c.Name] = s.values[i]
		}
	}
	return r
}

// ScanTable yields every row of a view's table in Cassandra, tombstones
// included, as the sink reads rows.
func ScanTable(ctx context.Context, session *gocql.Session, schema ViewSchema, consistency gocql.Consistency) iter.Seq2[MemRow, error] {
	return func(yield func(MemRow, error) bool) {
		v, err := compileView(schema, 1<<20)
		if err != nil {
			yield(MemRow{}, err)
			return
		}
		selectCQL, _, _ := statements(schema)
		keys := make([]string, len(v.keyTypes))
		for i, k := range schema.StorageKey() {
			keys[i] = quote(k.Name)
		}
		// The row read of the sink, with the key in front and no WHERE.
		q := "SELECT " + strings.Join(keys, ", ") + ", " + strings.TrimPrefix(selectCQL[:strings.Index(selectCQL, " WHERE ")], "SELECT ")
		it := session.Query(q).WithContext(ctx).Consistency(consistency).PageSize(1000).Iter()
		for {
			keyDests := make([]any, len(v.keyTypes))
			for i, t := range v.keyTypes {
				keyDests[i] = t.scanDest()
			}
			dests := v.rowDests()
			if !it.Scan(append(slices.Clone(keyDests), dests...)...) {
				break
			}
			state, err := v.scanned(dests)
			if err != nil {
				it.Close()
				yield(MemRow{}, err)
				return
			}
			key := make([]any, len(keyDests))
			for i, t := range v.keyTypes {
				key[i] = t.fromScan(keyDests[i])
			}
			if !yield(v.memRow(key, state), nil) {
				it.Close()
				return
			}
		}
		if err := it.Close(); err != nil {
			yield(MemRow{}, fmt.Errorf("reading %s: %w", schema.qualifiedTable(), err))
		}
	}
}

// ReadRow reads one row of a view's table as the sink reads it; found is
// false when Cassandra has no such row.
func ReadRow(ctx context.Context, session *gocql.Session, schema ViewSchema, key []any, consistency gocql.Consistency) (MemRow, bool, error) {
	v, err := compileView(schema, 1<<20)
	if err != nil {
		return MemRow{}, false, err
	}
	selectCQL, _, _ := statements(schema)
	args := make([]any, len(key))
	for i, k := range key {
		args[i] = v.keyTypes[i].bind(k)
	}
	dests := v.rowDests()
	err = session.Query(selectCQL, args...).WithContext(ctx).Consistency(consistency).Scan(dests...)
	if errors.Is(err, gocql.ErrNotFound) {
		return MemRow{}, false, nil
	}
	if err != nil {
		return MemRow{}, false, fmt.Errorf("reading a row of %s: %w", schema.qualifiedTable(), err)
	}
	state, err := v.scanned(dests)
	if err != nil {
		return MemRow{}, false, err
	}
	return v.memRow(key, state), true, nil
}

// ReadTiles reads the tiles of a windowed view's entity whose start lies
// in [from, to], as the sink reads rows. key holds the view's key values in
// order, of Go types gocql marshals for their columns.
func ReadTiles(ctx context.Context, session *gocql.Session, schema ViewSchema, key []any, from, to time.Time, consistency gocql.Consistency) ([]Tile, error) {
	v, err := compileView(schema, 1<<20)
	if err != nil {
		return nil, err
	}
	if !v.windowed {
		return nil, fmt.Errorf("reading tiles of %s: the view has no windows", schema.View)
	}
	if len(key) != len(schema.Key) {
		return nil, fmt.Errorf("reading tiles of %s: %w: %d key values for the key columns %s", schema.View, ErrBadKey, len(key), v.keyNames())
	}
	selectCQL, _, _ := statements(schema)
	where := make([]string, 0, len(key)+2)
	args := make([]any, 0, len(key)+2)
	for i, k := range schema.Key {
		where = append(where, quote(k.Name)+" = ?")
		args = append(args, key[i]) // as the caller has it: gocql marshals any Go integer, string, time
	}
	where = append(where, quote(ColumnTile)+" >= ?", quote(ColumnTile)+" <= ?")
	args = append(args, from, to)
	// The sink's row read with the tile in front and the entity's range.
	q := "SELECT " + quote(ColumnTile) + ", " + strings.TrimPrefix(selectCQL[:strings.Index(selectCQL, " WHERE ")], "SELECT ") +
		" WHERE " + strings.Join(where, " AND ")
	it := session.Query(q, args...).WithContext(ctx).Consistency(consistency).Iter()
	var tiles []Tile
	for {
		var start time.Time
		dests := v.rowDests()
		if !it.Scan(append([]any{&start}, dests...)...) {
			break
		}
		state, err := v.scanned(dests)
		if err != nil {
			it.Close()
			return nil, err
		}
		r := v.memRow(nil, state)
		tiles = append(tiles, Tile{Start: start.UTC(), Values: r.Values, LatestAt: r.LatestAt})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("reading tiles of %s: %w", schema.qualifiedTable(), err)
	}
	return tiles, nil
}

// SameValues reports whether two rows hold the same values (and the same
// deleted flag); times compare at Cassandra's millisecond precision.
func SameValues(a, b MemRow) bool {
	if a.Deleted != b.Deleted || len(a.Values) != len(b.Values) {
		return false
	}
	for c, av := range a.Values {
		bv, ok := b.Values[c]
		if !ok {
			return false
		}
		if at, isTime := av.(time.Time); isTime {
			bt, _ := bv.(time.Time)
			if !at.Truncate(time.Millisecond).Equal(bt.Truncate(time.Millisecond)) {
				return false
			}
			continue
		}
		if compareValues(av, bv) != 0 {
			return false
		}
	}
	return true
}
