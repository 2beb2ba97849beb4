package envelope

import (
	"encoding/json"
	"fmt"
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
	if op.View == "" {
		return fmt.Errorf("view operation: field view is empty")
	}
	if len(op.Key) == 0 {
		return fmt.Errorf("view operation on %s: field key is empty", op.View)
	}
	switch op.Kind {
	case OpDelete:
		if len(op.Columns) > 0 {
			return fmt.Errorf("view operation on %s: a delete carries no columns", op.View)
		}
	case OpApply:
		if len(op.Columns) == 0 {
			return fmt.Errorf("view operation on %s: an apply carries no columns", op.View)
		}
		for i, c := range op.Columns {
			if c.Column == "" {
				return fmt.Errorf("view operation on %s: columns[%d].column is empty", op.View, i)
			}
			if !c.Merge.Valid() {
				return fmt.Errorf("view operation on %s: columns[%d].merge %q is not one of set, add, max, min, latest", op.View, i, c.Merge)
			}
			if len(c.Value) == 0 {
				return fmt.Errorf("view operation on %s: columns[%d].value is missing", op.View, i)
			}
		}
	default:
		return fmt.Errorf("view operation on %s: field op %q is not apply or delete", op.View, op.Kind)
	}
	return nil
}

// DecodeViewOp parses and validates a view-operation payload. It reads the
// payload exactly as encoding/json would into a ViewOp (same accepted inputs,
// same result, same error text), by a hand-written reader for the usual
// payloads and encoding/json itself for the rest.
func DecodeViewOp(payload []byte) (ViewOp, error) {
	op, ok := decodeViewOp(payload)
	if !ok {
		op = ViewOp{}
		if err := json.Unmarshal(payload, &op); err != nil {
			return ViewOp{}, fmt.Errorf("decoding view operation: %w", err)
		}
	}
	if err := op.Validate(); err != nil {
		return ViewOp{}, err
	}
	return op, nil
}
