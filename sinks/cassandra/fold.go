package cassandra

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// Op is one view operation together with the ledger event that caused it:
// the unit the Applier applies exactly once.
type Op struct {
	View   envelope.RowOp
	Origin envelope.Origin
}

// Errors that make an operation impossible to apply, ever. The Applier wraps
// them; the sink hands them to the dead-letter topic.
var (
	ErrWrongView     = errors.New("operation is for another view")
	ErrUnknownColumn = errors.New("operation names a column the view does not have")
	ErrWrongMerge    = errors.New("operation's merge rule differs from the view's")
	ErrBadKey        = errors.New("operation's key does not match the view's key columns")
	ErrEpochChanged  = errors.New("operation comes from another epoch of its ledger topic")
)

// compiledView is a validated ViewSchema with its column types looked up.
type compiledView struct {
	schema ViewSchema
	// keyTypes are the types of the table's key (StorageKey): the view's
	// key, then for a windowed view the tile start.
	keyTypes      []*cqlType
	colTypes      []*cqlType
	colIndex      map[string]int
	maxValueBytes int

	// windowed views: each operation goes to its event time's tile (hop),
	// which expires retention after its start.
	windowed       bool
	hop, retention time.Duration
	// now is the clock that expires tiles; nil folds every tile (a fold in
	// memory keeps history, a table keeps the present).
	now func() time.Time
}

func compileView(s ViewSchema, maxValueBytes int) (*compiledView, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("validating view %s: %w", s.View, err)
	}
	v := &compiledView{schema: s, colIndex: map[string]int{}, maxValueBytes: maxValueBytes,
		windowed: s.Windowed(), hop: s.Hop.Duration(), retention: s.Retention()}
	for _, k := range s.StorageKey() {
		t, _ := lookupType(k.Type)
		v.keyTypes = append(v.keyTypes, t)
	}
	for i, c := range s.Columns {
		t, _ := lookupType(c.Type)
		v.colTypes = append(v.colTypes, t)
		v.colIndex[c.Name] = i
	}
	return v, nil
}

// boundOp is an Op checked against the view and decoded into typed values.
type boundOp struct {
	// index is the op's place in the batch handed to Apply.
	index     int
	key       []any
	rowKey    string
	kind      envelope.OpKind
	eventTime time.Time
	origin    envelope.Origin
	columns   []columnValue
}

type columnValue struct {
	column int
	value  any
}

// bindArena hands out the key and column slices of a batch's bound
// operations from a few allocations instead of two or more per operation,
// and remembers the keys it has decoded: a batch holds many operations on
// each of its rows, and a row's key need only be decoded, checked and made
// into its row key once. The zero value allocates for each operation and
// remembers nothing.
type bindArena struct {
	keys []any
	cols []columnValue
	// rows holds the keys decoded so far by their JSON (keyJSON).
	rows map[string]boundKey
}

// boundKey is a row's decoded key and its row key.
type boundKey struct {
	key    []any
	rowKey string
}

// newBindArena returns an arena with room for ops.
func (v *compiledView) newBindArena(ops []Op) *bindArena {
	cols := 0
	for _, op := range ops {
		cols += len(op.View.Columns)
	}
	return &bindArena{keys: make([]any, 0, len(ops)*len(v.keyTypes)), cols: make([]columnValue, 0, cols), rows: map[string]boundKey{}}
}

// keyJSON appends the JSON of the operation's key values, in the view's
// key order and each after its length, to buf: equal for two operations
// exactly when their key values are the same bytes, which decode to the
// same key. ok is false when a key column is missing or buf has no room
// (it never grows).
func (v *compiledView) keyJSON(buf []byte, vo envelope.RowOp) (_ []byte, ok bool) {
	for _, k := range v.schema.Key {
		raw, ok := vo.Value(k.Name)
		if !ok || cap(buf)-len(buf) < binary.MaxVarintLen64+len(raw) {
			return buf, false
		}
		buf = append(binary.AppendUvarint(buf, uint64(len(raw))), raw...)
	}
	return buf, true
}

// take returns an empty slice with room for n elements, cut from *pool
// while it has room.
func take[T any](pool *[]T, n int) []T {
	p := *pool
	if cap(p)-len(p) < n {
		return make([]T, 0, n)
	}
	*pool = p[:len(p)+n]
	return p[len(p) : len(p) : len(p)+n]
}

// bind decodes and checks an operation, taking its slices from arena. Every
// error it returns is permanent: the same operation can never apply.
func (v *compiledView) bind(index int, op Op, arena *bindArena) (boundOp, error) {
	vo := op.View
	if err := vo.Validate(); err != nil {
		return boundOp{}, err
	}
	if vo.View != v.schema.View {
		return boundOp{}, fmt.Errorf("%w: %q reached the sink of view %q", ErrWrongView, vo.View, v.schema.View)
	}
	if op.Origin.IsZero() {
		return boundOp{}, fmt.Errorf("binding operation on %s: %w", vo.View, envelope.ErrNoOrigin)
	}
	b := boundOp{index: index, kind: vo.Kind, eventTime: vo.EventTime, origin: op.Origin}
	if len(vo.Key) != len(v.schema.Key) {
		return boundOp{}, fmt.Errorf("%w: got %d key columns, the view has %d (%s)", ErrBadKey, len(vo.Key), len(v.schema.Key), v.keyNames())
	}
	var tile time.Time
	if v.windowed {
		var err error
		if tile, err = v.tileOf(vo); err != nil {
			return boundOp{}, err
		}
	}
	if arena == nil {
		arena = &bindArena{}
	}
	var keyBuf [internMaxBytes]byte
	keyJSON, known := v.keyJSON(keyBuf[:0], vo)
	if v.windowed && known {
		// Each tile is a row of its own.
		keyJSON = binary.AppendVarint(keyJSON, tile.UnixMilli())
	}
	if bk, ok := arena.rows[string(keyJSON)]; known && ok {
		b.key, b.rowKey = bk.key, bk.rowKey
	} else if err := v.bindKey(&b, vo, tile, arena); err != nil {
		return boundOp{}, err
	} else if known && arena.rows != nil {
		arena.rows[string(keyJSON)] = boundKey{key: b.key, rowKey: b.rowKey}
	}
	b.columns = take(&arena.cols, len(vo.Columns))
	for _, c := range vo.Columns {
		i, ok := v.colIndex[c.Column]
		if !ok {
			return boundOp{}, fmt.Errorf("%w: %s", ErrUnknownColumn, c.Column)
		}
		def := v.schema.Columns[i]
		if c.Merge != def.Merge {
			return boundOp{}, fmt.Errorf("%w: column %s merges by %s, the operation says %s", ErrWrongMerge, c.Column, def.Merge, c.Merge)
		}
		// A JSON null would decode as the type's zero value; like the
		// reference fold (memview), the sink refuses it.
		if string(bytes.TrimSpace(c.Value)) == "null" {
			return boundOp{}, fmt.Errorf("column %s: %w: null is not a value", c.Column, ErrBadValue)
		}
		val, err := v.colTypes[i].decode(c.Value)
		if err != nil {
			return boundOp{}, fmt.Errorf("column %s: %w", c.Column, err)
		}
		if err := v.checkSize(c.Column, val); err != nil {
			return boundOp{}, err
		}
		b.columns = append(b.columns, columnValue{column: i, value: val})
	}
	return b, nil
}

// tileOf is the tile a windowed view's operation goes to, or why it goes
// to none: a windowed view takes no deletes (a tile is a span of events,
// not an entity), needs the event's time, and drops an operation whose
// tile has expired (ErrExpired).
func (v *compiledView) tileOf(vo envelope.RowOp) (time.Time, error) {
	if vo.Kind != envelope.OpApply {
		return time.Time{}, fmt.Errorf("%w: a windowed view takes only apply operations, not %s", ErrBadValue, vo.Kind)
	}
	if vo.EventTime.IsZero() {
		return time.Time{}, fmt.Errorf("%w: an operation on a windowed view needs its event time (Output.At)", ErrBadValue)
	}
	tile := TileStart(vo.EventTime, v.hop)
	if v.now != nil && !tile.Add(v.retention).After(v.now()) {
		return time.Time{}, fmt.Errorf("%w: the tile of %s expired at %s", ErrExpired, vo.EventTime.UTC().Format(time.RFC3339Nano), tile.Add(v.retention).Format(time.RFC3339))
	}
	return tile, nil
}

// tileTTL is the seconds a windowed view's tile (the last value of key) has
// left, at least 1: a TTL of 0 would mean forever.
func (v *compiledView) tileTTL(key []any) int {
	expires := key[len(key)-1].(time.Time).Add(v.retention)
	return max(1, int((expires.Sub(v.now())+time.Second-1)/time.Second))
}

// bindKey decodes and checks the operation's key into b, with a windowed
// view's tile after it, taking its slice from arena.
func (v *compiledView) bindKey(b *boundOp, vo envelope.RowOp, tile time.Time, arena *bindArena) error {
	b.key = take(&arena.keys, len(v.keyTypes))
	for i, k := range v.schema.Key {
		raw, ok := vo.Value(k.Name)
		if !ok {
			return fmt.Errorf("%w: key column %s is missing", ErrBadKey, k.Name)
		}
		if string(bytes.TrimSpace(raw)) == "null" {
			return fmt.Errorf("%w: key column %s is null", ErrBadKey, k.Name)
		}
		val, err := v.keyTypes[i].decode(raw)
		if err != nil {
			return fmt.Errorf("key column %s: %w", k.Name, err)
		}
		if err := v.checkSize(k.Name, val); err != nil {
			return err
		}
		b.key = append(b.key, val)
	}
	if v.windowed {
		b.key = append(b.key, tile)
	}
	b.rowKey = keyString(b.key)
	return nil
}

func (v *compiledView) checkSize(column string, val any) error {
	if s, ok := val.(string); ok && len(s) > v.maxValueBytes {
		return fmt.Errorf("column %s: %w: %d bytes is more than max_value_bytes %d", column, ErrBadValue, len(s), v.maxValueBytes)
	}
	return nil
}

func (v *compiledView) keyNames() string {
	names := make([]string, len(v.schema.Key))
	for i, k := range v.schema.Key {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}

// rowState is what the sink knows of one row: its values, and the
// bookkeeping that makes applying idempotent.
type rowState struct {
	// values holds one canonical value per view column; nil is null.
	values []any
	// latestAt holds, per column name with merge latest, the event time of
	// the current value.
	latestAt map[string]time.Time
	// applied holds, per origin topic, the last position folded into the row.
	applied map[string]envelope.Position
	deleted bool
}

func newRowState(columns int) *rowState {
	return &rowState{values: make([]any, columns), latestAt: map[string]time.Time{}, applied: map[string]envelope.Position{}}
}

func (r *rowState) clone() *rowState {
	return &rowState{
		values:   append([]any(nil), r.values...),
		latestAt: maps.Clone(r.latestAt),
		applied:  maps.Clone(r.applied),
		deleted:  r.deleted,
	}
}

// alreadyApplied reports whether the row has seen op: positions of one
// origin partition are delivered in order, so anything at or before the
// last applied position of the op's partition is a redelivery. A position
// of another epoch of the partition (its ledger topic created anew, so that
// ledger ids started again) cannot be compared at all: ErrEpochChanged.
func (r *rowState) alreadyApplied(o envelope.Origin) (bool, error) {
	last, ok := r.applied[o.Topic]
	if !ok {
		return false, nil
	}
	if !last.SameEpoch(o.Position) {
		return false, fmt.Errorf("%w: %s is at epoch %s in this row and the operation (%s) is of epoch %s; the table was built from another incarnation of the ledger topic: build the view anew (foldline backfill) instead of applying it here",
			ErrEpochChanged, o.Topic, last.Epoch, o.Position, o.Position.Epoch)
	}
	return o.Position.Compare(last) <= 0, nil
}

// advance records op's position as the row's last applied one of its
// partition, keeping a known epoch when op's is unknown.
func (r *rowState) advance(o envelope.Origin) {
	pos := o.Position
	if pos.Epoch == "" {
		pos.Epoch = r.applied[o.Topic].Epoch
	}
	r.applied[o.Topic] = pos
}

// fold applies one operation to the row in place. It returns false for a
// redelivered operation, which changes nothing. An error (an overflowing
// sum, another epoch) is permanent and leaves the row untouched.
func (v *compiledView) fold(r *rowState, op boundOp) (bool, error) {
	if done, err := r.alreadyApplied(op.origin); done || err != nil {
		return false, err
	}
	if op.kind == envelope.OpDelete {
		clear(r.values)
		clear(r.latestAt)
		r.deleted = true
		r.advance(op.origin)
		return true, nil
	}
	// Merge into a list of changes first so that an error leaves the row as
	// it was.
	var buf [8]columnValue
	changes := buf[:0]
	var latest map[string]time.Time // allocated by the first latest column
	for _, c := range op.columns {
		def := v.schema.Columns[c.column]
		cur := r.values[c.column]
		change := -1 // the column's entry in changes, once it has one
		for i := range changes {
			if changes[i].column == c.column {
				cur, change = changes[i].value, i
			}
		}
		next := cur
		switch def.Merge {
		case envelope.MergeSet:
			next = c.value
		case envelope.MergeAdd:
			if cur == nil {
				next = c.value
				break
			}
			sum, err := v.colTypes[c.column].addValues(cur, c.value)
			if err != nil {
				return false, fmt.Errorf("column %s: %w", def.Name, err)
			}
			next = sum
		case envelope.MergeMax:
			if cur == nil || compareValues(c.value, cur) > 0 {
				next = c.value
			}
		case envelope.MergeMin:
			if cur == nil || compareValues(c.value, cur) < 0 {
				next = c.value
			}
		case envelope.MergeLatest:
			// Ties go to the later operation: within one origin partition
			// that is the later ledger position.
			at, seen := latest[def.Name]
			if !seen {
				at, seen = r.latestAt[def.Name]
			}
			if !seen || !op.eventTime.Before(at) {
				next = c.value
				if latest == nil {
					latest = map[string]time.Time{}
				}
				latest[def.Name] = op.eventTime
			}
		}
		if change >= 0 {
			changes[change].value = next
		} else {
			changes = append(changes, columnValue{column: c.column, value: next})
		}
	}
	for _, c := range changes {
		r.values[c.column] = c.value
	}
	maps.Copy(r.latestAt, latest)
	r.deleted = false
	r.advance(op.origin)
	return true, nil
}

// rowGroup is every operation of one batch on one row, in arrival order.
type rowGroup struct {
	key    []any
	rowKey string
	ops    []boundOp
	// before is the row as Cassandra holds it, when its worker read it
	// together with other rows (readUncached); nil otherwise.
	before *rowState
}

// coalesce groups operations by row, keeping the rows in order of first
// appearance and each row's operations in arrival order, so that folding a
// group gives the same row as folding the batch one by one.
// The groups' operations share one array, each group's part of it sized
// by a first count.
func coalesce(ops []boundOp) []*rowGroup {
	byKey := map[string]int{}
	var groups []*rowGroup
	var counts []int
	of := make([]int32, len(ops)) // each operation's group
	for i, op := range ops {
		g, ok := byKey[op.rowKey]
		if !ok {
			g = len(groups)
			byKey[op.rowKey] = g
			groups = append(groups, &rowGroup{key: op.key, rowKey: op.rowKey})
			counts = append(counts, 0)
		}
		counts[g]++
		of[i] = int32(g)
	}
	all := make([]boundOp, 0, len(ops))
	for g, n := range counts {
		groups[g].ops = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for i, op := range ops {
		g := groups[of[i]]
		g.ops = append(g.ops, op)
	}
	return groups
}

// rowWrite is the difference between a row before and after a fold: what
// one CQL write must change.
type rowWrite struct {
	// changed marks the columns whose value differs.
	changed []bool
	// replaceLatest is set when the fold deleted the row: the latest-at map
	// is written whole instead of appended to, dropping the old entries.
	replaceLatest bool
	latestAt      map[string]time.Time
	applied       map[string]string
	// setDeleted marks a change of the deleted flag, to deleted; otherwise
	// the write leaves ColumnDeleted alone (null, for a row never deleted,
	// means not deleted).
	setDeleted, deleted bool
}

// diff computes the write that turns before into after; ok is false when
// they are equal (every operation was a redelivery).
func diff(before, after *rowState, sawDelete bool) (rowWrite, bool) {
	w := rowWrite{changed: make([]bool, len(after.values)), replaceLatest: sawDelete, applied: map[string]string{},
		setDeleted: before.deleted != after.deleted, deleted: after.deleted}
	for i := range after.values {
		w.changed[i] = !equalValues(before.values[i], after.values[i])
	}
	for topic, pos := range after.applied {
		if old, ok := before.applied[topic]; !ok || old != pos {
			w.applied[topic] = pos.String()
		}
	}
	if len(w.applied) == 0 {
		return rowWrite{}, false
	}
	if sawDelete {
		w.latestAt = maps.Clone(after.latestAt)
	} else {
		w.latestAt = map[string]time.Time{}
		for c, at := range after.latestAt {
			if old, ok := before.latestAt[c]; !ok || !old.Equal(at) {
				w.latestAt[c] = at
			}
		}
	}
	return w, true
}
