// Package memview applies view operations to rows held in memory. It is the
// reference semantics of the merge rules (set, add, max, min, latest) and of
// delete: tests fold a pipeline's operations through it and compare the
// result with an independent fold of the ledger, and the Cassandra sink's
// tests may check their tables against it.
//
// Operations are applied in the order Apply is called, which stands for
// ledger order. Deduplicating redelivered operations is not its job (the
// sink's exactly-once machinery is): applying one operation twice here
// applies it twice.
//
// Values are the JSON scalars of envelope.ColumnOp, held as int64 (whole
// numbers), float64 (other numbers), string (text and timestamps) or bool.
// Max and min compare numbers numerically, strings that are both RFC 3339
// timestamps as instants, other strings bytewise, and false before true.
package memview

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// ErrIncomparable is matched by the error Apply returns when a column's
// stored and new values cannot be added or compared (say, a number and a
// string).
var ErrIncomparable = errors.New("incomparable column values")

// Row is one row of a view.
type Row struct {
	// Key holds the key columns' values.
	Key map[string]any
	// Columns holds the value columns that some operation has set; a column
	// no operation touched is absent (null in CQL).
	Columns map[string]any
}

type row struct {
	Row
	// latestAt is the event time of each MergeLatest column's value.
	latestAt map[string]time.Time
}

// Views holds the rows of any number of views. The zero value is not ready;
// use New. It is not safe for concurrent use.
type Views struct {
	views map[string]map[string]*row
}

// New returns an empty set of views.
func New() *Views {
	return &Views{views: make(map[string]map[string]*row)}
}

// Apply applies one operation. On error the row is left as it was.
func (v *Views) Apply(op envelope.ViewOp) error {
	if err := op.Validate(); err != nil {
		return err
	}
	rowID, key, err := decodeKey(op.Key)
	if err != nil {
		return fmt.Errorf("applying operation on %s: %w", op.View, err)
	}
	rows := v.views[op.View]
	if rows == nil {
		rows = make(map[string]*row)
		v.views[op.View] = rows
	}
	if op.Kind == envelope.OpDelete {
		delete(rows, rowID)
		return nil
	}
	old := rows[rowID]
	next := &row{Row: Row{Key: key, Columns: map[string]any{}}, latestAt: map[string]time.Time{}}
	if old != nil {
		maps.Copy(next.Columns, old.Columns)
		maps.Copy(next.latestAt, old.latestAt)
	}
	for _, c := range op.Columns {
		if err := next.merge(c, op.EventTime); err != nil {
			return fmt.Errorf("applying operation on %s %s: column %s: %w", op.View, rowID, c.Column, err)
		}
	}
	rows[rowID] = next
	return nil
}

func (r *row) merge(c envelope.ColumnOp, at time.Time) error {
	val, err := decodeValue(c.Value)
	if err != nil {
		return err
	}
	stored, has := r.Columns[c.Column]
	switch c.Merge {
	case envelope.MergeSet:
		r.Columns[c.Column] = val
	case envelope.MergeAdd:
		if !has {
			stored = int64(0)
		}
		sum, err := add(stored, val)
		if err != nil {
			return err
		}
		r.Columns[c.Column] = sum
	case envelope.MergeMax, envelope.MergeMin:
		if !has {
			r.Columns[c.Column] = val
			return nil
		}
		order, err := compare(val, stored)
		if err != nil {
			return err
		}
		if (c.Merge == envelope.MergeMax && order > 0) || (c.Merge == envelope.MergeMin && order < 0) {
			r.Columns[c.Column] = val
		}
	case envelope.MergeLatest:
		// Ties go to the later ledger position, which is the later Apply.
		if !has || !at.Before(r.latestAt[c.Column]) {
			r.Columns[c.Column] = val
			r.latestAt[c.Column] = at
		}
	}
	return nil
}

// Rows returns the rows of a view in a stable order (by their key's JSON).
func (v *Views) Rows(view string) []Row {
	rows := v.views[view]
	ids := slices.Sorted(maps.Keys(rows))
	out := make([]Row, 0, len(ids))
	for _, id := range ids {
		out = append(out, Row{Key: maps.Clone(rows[id].Key), Columns: maps.Clone(rows[id].Columns)})
	}
	return out
}

// Get returns the row of view whose key columns have the given values.
func (v *Views) Get(view string, key map[string]any) (Row, bool) {
	raw := make(map[string]json.RawMessage, len(key))
	for col, val := range key {
		b, err := json.Marshal(val)
		if err != nil {
			return Row{}, false
		}
		raw[col] = b
	}
	id, _, err := decodeKey(raw)
	if err != nil {
		return Row{}, false
	}
	r, ok := v.views[view][id]
	if !ok {
		return Row{}, false
	}
	return Row{Key: maps.Clone(r.Key), Columns: maps.Clone(r.Columns)}, true
}

// decodeKey returns a canonical identity of a row's key and its values.
func decodeKey(raw map[string]json.RawMessage) (string, map[string]any, error) {
	key := make(map[string]any, len(raw))
	for col, b := range raw {
		val, err := decodeValue(b)
		if err != nil {
			return "", nil, fmt.Errorf("key column %s: %w", col, err)
		}
		key[col] = val
	}
	id, err := json.Marshal(key) // map keys sorted, values canonical
	if err != nil {
		return "", nil, fmt.Errorf("encoding key: %w", err)
	}
	return string(id), key, nil
}

// decodeValue reads a JSON scalar.
func decodeValue(b json.RawMessage) (any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, errors.New("empty value")
	}
	switch c := b[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("decoding value %s: %w", b, err)
		}
		return s, nil
	case c == 't' || c == 'f':
		var x bool
		if err := json.Unmarshal(b, &x); err != nil {
			return nil, fmt.Errorf("decoding value %s: %w", b, err)
		}
		return x, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return nil, fmt.Errorf("decoding value %s: %w", b, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("value %s is not a JSON string, number or bool", b)
}

func add(a, b any) (any, error) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return x + y, nil
		case float64:
			return float64(x) + y, nil
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return x + float64(y), nil
		case float64:
			return x + y, nil
		}
	}
	return nil, fmt.Errorf("adding %T to %T: %w", b, a, ErrIncomparable)
}

func compare(a, b any) (int, error) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y), nil
		case float64:
			return cmp.Compare(float64(x), y), nil
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, float64(y)), nil
		case float64:
			return cmp.Compare(x, y), nil
		}
	case string:
		if y, ok := b.(string); ok {
			tx, errX := time.Parse(time.RFC3339Nano, x)
			ty, errY := time.Parse(time.RFC3339Nano, y)
			if errX == nil && errY == nil {
				return tx.Compare(ty), nil
			}
			return cmp.Compare(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0, nil
			case y:
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("comparing %T with %T: %w", a, b, ErrIncomparable)
}
