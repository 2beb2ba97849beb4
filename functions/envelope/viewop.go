package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OpKind says what a view operation does to its row.
type OpKind string

// The kinds of view operation.
const (
	// OpApply merges each column's value into the row by its merge rule.
	OpApply OpKind = "apply"
	// OpDelete removes the row.
	OpDelete OpKind = "delete"
)

// Merge is the rule that folds a column value into the stored one.
type Merge string

// The merge rules a view column may use.
const (
	// MergeSet overwrites: the value of the operation latest in ledger order wins.
	MergeSet Merge = "set"
	// MergeAdd adds the value (counts and sums; may be negative).
	MergeAdd Merge = "add"
	// MergeMax keeps the greatest value seen.
	MergeMax Merge = "max"
	// MergeMin keeps the smallest value seen.
	MergeMin Merge = "min"
	// MergeLatest keeps the value of the operation with the latest event
	// time; ties go to the later ledger position.
	MergeLatest Merge = "latest"
)

// Valid reports whether m is a known merge rule.
func (m Merge) Valid() bool {
	switch m {
	case MergeSet, MergeAdd, MergeMax, MergeMin, MergeLatest:
		return true
	}
	return false
}

// ColumnOp is one column's part of a view operation.
type ColumnOp struct {
	Column string `json:"column"`
	Merge  Merge  `json:"merge"`
	// Value is a JSON scalar: a number for numeric columns, a string for text,
	// an RFC 3339 string for timestamps, a bool for booleans.
	Value json.RawMessage `json:"value"`
}

// ViewOp is one operation on one row of a view: the payload of every message
// on a view-operation topic. Its origin travels in the message properties, not
// in the payload.
type ViewOp struct {
	View string `json:"view"`
	// Key holds the values of the view's key columns, by column name.
	Key  map[string]json.RawMessage `json:"key"`
	Kind OpKind                     `json:"op"`
	// EventTime is the causing event's time; MergeLatest compares it.
	EventTime time.Time  `json:"time"`
	Columns   []ColumnOp `json:"columns,omitempty"`
}

// Validate checks the operation's shape (not its columns against a schema).
func (op ViewOp) Validate() error {
	return validateOp(op.View, len(op.Key), op.Kind, op.Columns)
}

// validateOp is Validate of a ViewOp and of a RowOp.
func validateOp(view string, keys int, kind OpKind, columns []ColumnOp) error {
	if view == "" {
		return fmt.Errorf("view operation: field view is empty")
	}
	if keys == 0 {
		return fmt.Errorf("view operation on %s: field key is empty", view)
	}
	switch kind {
	case OpDelete:
		if len(columns) > 0 {
			return fmt.Errorf("view operation on %s: a delete carries no columns", view)
		}
	case OpApply:
		if len(columns) == 0 {
			return fmt.Errorf("view operation on %s: an apply carries no columns", view)
		}
		for i, c := range columns {
			if c.Column == "" {
				return fmt.Errorf("view operation on %s: columns[%d].column is empty", view, i)
			}
			if !c.Merge.Valid() {
				return fmt.Errorf("view operation on %s: columns[%d].merge %q is not one of set, add, max, min, latest", view, i, c.Merge)
			}
			if len(c.Value) == 0 {
				return fmt.Errorf("view operation on %s: columns[%d].value is missing", view, i)
			}
		}
	default:
		return fmt.Errorf("view operation on %s: field op %q is not apply or delete", view, kind)
	}
	return nil
}

// KeyValue is one key column of a RowOp and its value, a JSON scalar.
type KeyValue struct {
	Column string
	Value  json.RawMessage
}

// RowOp is a ViewOp as a transformation builds it: its key is a list of
// key columns sorted by name, without duplicates, so that building one
// allocates no map. It is the same operation as op.ViewOp() and has the
// same payload (AppendJSON) and the same Validate.
type RowOp struct {
	View      string
	Key       []KeyValue
	Kind      OpKind
	EventTime time.Time
	Columns   []ColumnOp
}

// ViewOp returns the operation as a ViewOp.
func (op RowOp) ViewOp() ViewOp {
	var key map[string]json.RawMessage
	if op.Key != nil {
		key = make(map[string]json.RawMessage, len(op.Key))
		for _, k := range op.Key {
			key[k.Column] = k.Value
		}
	}
	return ViewOp{View: op.View, Key: key, Kind: op.Kind, EventTime: op.EventTime, Columns: op.Columns}
}

// Validate checks the operation's shape, as ViewOp.Validate does.
func (op RowOp) Validate() error {
	return validateOp(op.View, len(op.Key), op.Kind, op.Columns)
}

// DecodeViewOp parses and validates a view-operation payload. It reads the
// payload exactly as encoding/json would into a ViewOp (same accepted inputs,
// same result, same error text), by a hand-written reader for the usual
// payloads and encoding/json itself for the rest.
func DecodeViewOp(payload []byte) (ViewOp, error) {
	op, ok := decodeRowOp(payload, false)
	if !ok {
		return decodeViewOpJSON(payload)
	}
	if err := op.Validate(); err != nil {
		return ViewOp{}, err
	}
	return op.ViewOp(), nil
}

// DecodeRowOp is DecodeViewOp returning the operation as a RowOp (its key
// sorted, a member named twice in the key taken last, as encoding/json
// keeps the last), without building the key's map: what the sink binds.
// Same accepted inputs, same error text, and DecodeRowOp(p).ViewOp()
// equals DecodeViewOp(p). Unlike DecodeViewOp's, the operation's raw values
// may be payload's own bytes: payload must not change while it is in use.
func DecodeRowOp(payload []byte) (RowOp, error) {
	op, ok := decodeRowOp(payload, true)
	if !ok {
		vo, err := decodeViewOpJSON(payload)
		if err != nil {
			return RowOp{}, err
		}
		return vo.RowOp(), nil
	}
	if err := op.Validate(); err != nil {
		return RowOp{}, err
	}
	return op, nil
}

// decodeViewOpJSON is DecodeViewOp by encoding/json, for the payloads the
// hand-written reader leaves to it.
func decodeViewOpJSON(payload []byte) (ViewOp, error) {
	var op ViewOp
	if err := json.Unmarshal(payload, &op); err != nil {
		return ViewOp{}, fmt.Errorf("decoding view operation: %w", err)
	}
	if err := op.Validate(); err != nil {
		return ViewOp{}, err
	}
	return op, nil
}

// RowOp returns the operation as a RowOp, its key sorted by column.
func (op ViewOp) RowOp() RowOp {
	var key []KeyValue
	if op.Key != nil {
		key = sortedKey(make([]KeyValue, 0, len(op.Key)), op.Key)
	}
	return RowOp{View: op.View, Key: key, Kind: op.Kind, EventTime: op.EventTime, Columns: op.Columns}
}

// sortedKey appends the key's columns to dst, sorted by name.
func sortedKey(dst []KeyValue, key map[string]json.RawMessage) []KeyValue {
	for col, v := range key {
		dst = append(dst, KeyValue{Column: col, Value: v})
	}
	slices.SortFunc(dst, func(x, y KeyValue) int { return strings.Compare(x.Column, y.Column) })
	return dst
}

// Value returns the value of the key column, and false when the key has
// no such column.
func (op RowOp) Value(column string) (json.RawMessage, bool) {
	for _, k := range op.Key {
		if k.Column == column {
			return k.Value, true
		}
	}
	return nil, false
}
