package declared

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/foldline/foldline/functions/envelope"
)

// UserConfigSpec is the user-config key that carries a declared view's
// Spec, as JSON text (integers of any size survive it exactly, which a
// JSON object in the user config, read back as float64, would not).
const UserConfigSpec = "declaredView"

// Spec is what a declared view's transformation computes: which events
// count (Filter), the row each one goes to (Key), and each column's
// contribution (Columns). The manifest loader builds it from a view's
// from section and columns; the function gets it in its user config.
type Spec struct {
	// View is the view the operations name (ViewOp.View).
	View string `json:"view"`
	// Filter keeps the events whose fields equal the given values: field
	// name to the values it may have (one of them), every field holding.
	// An event without the field, or with a value of another type, is left
	// out (not dead-lettered): a filter on type meets events of every type.
	// Empty keeps every event.
	Filter map[string][]Literal `json:"filter,omitempty"`
	// Key is the view's key column and the event field that fills it.
	Key KeySpec `json:"key"`
	// Columns are the view's value columns and how each event feeds them.
	Columns []ColumnSpec `json:"columns"`
}

// KeySpec ties the view's key column to an event field.
type KeySpec struct {
	// Column is the view's key column.
	Column string `json:"column"`
	// Type is its CQL type: text, varchar, ascii, bigint, int, smallint
	// or tinyint.
	Type string `json:"type"`
	// Field is the event field whose value keys the row.
	Field string `json:"field"`
}

// ColumnSpec is one value column of a declared view.
type ColumnSpec struct {
	// Name is the column.
	Name string `json:"name"`
	// Type is its CQL type (see Aggregate for which each takes).
	Type string `json:"type"`
	// Aggregate is how events fold into it.
	Aggregate Aggregate `json:"aggregate"`
	// Value is what each event contributes; none for count.
	Value Expr `json:"value,omitzero"`
}

// Aggregate is how a declared column folds events, in Chronon's words.
// Each implies the sink's merge rule:
//
//	count  adds 1 per event                      (add)    bigint, int, smallint, tinyint, double, float
//	sum    adds the value                        (add)    the same
//	min    keeps the least value                 (min)    the same, text, timestamp
//	max    keeps the greatest value              (max)    the same, text, timestamp
//	last   keeps the value of the latest event   (latest) the same, boolean
//	       time (ties: the later in the ledger)
//	avg    the mean of the values: stored as     (add)    double
//	       their sum and their count (two
//	       columns, AverageColumns), divided
//	       when read; null without any value
//
// An integer column's value is an expression over integer fields; a
// column of another type takes one field, read as that type (a timestamp
// from an RFC 3339 string). A double or float column takes either.
type Aggregate string

// The aggregates.
const (
	Count Aggregate = "count"
	Sum   Aggregate = "sum"
	Min   Aggregate = "min"
	Max   Aggregate = "max"
	Last  Aggregate = "last"
	Avg   Aggregate = "avg"
)

// Aggregates lists every aggregate, for messages.
var Aggregates = []Aggregate{Count, Sum, Min, Max, Last, Avg}

// AverageColumns are the stored columns of an avg column: the sum of its
// values and their count, both merged by add; readers divide them (see
// cassandra.Average).
func AverageColumns(name string) (sum, count string) { return name + "_sum", name + "_count" }

// Merge is the sink's merge rule the aggregate implies, "" for an unknown
// aggregate.
func (a Aggregate) Merge() envelope.Merge {
	switch a {
	case Count, Sum, Avg:
		return envelope.MergeAdd
	case Min:
		return envelope.MergeMin
	case Max:
		return envelope.MergeMax
	case Last:
		return envelope.MergeLatest
	}
	return ""
}

// kind is how a CQL type's values are read from events.
type kind int

const (
	kindInt kind = iota + 1
	kindFloat
	kindText
	kindTime
	kindBool
)

// columnType is a CQL type a declared view's column may have.
type columnType struct {
	kind     kind
	min, max int64 // an integer type's range
	ascii    bool
}

// columnTypes are the CQL types of declared columns, by lower-case name.
var columnTypes = map[string]columnType{
	"bigint":    {kind: kindInt, min: math.MinInt64, max: math.MaxInt64},
	"int":       {kind: kindInt, min: math.MinInt32, max: math.MaxInt32},
	"smallint":  {kind: kindInt, min: math.MinInt16, max: math.MaxInt16},
	"tinyint":   {kind: kindInt, min: math.MinInt8, max: math.MaxInt8},
	"double":    {kind: kindFloat},
	"float":     {kind: kindFloat},
	"text":      {kind: kindText},
	"varchar":   {kind: kindText},
	"ascii":     {kind: kindText, ascii: true},
	"timestamp": {kind: kindTime},
	"boolean":   {kind: kindBool},
}

func lookupType(name string) (columnType, bool) {
	t, ok := columnTypes[strings.ToLower(strings.TrimSpace(name))]
	return t, ok
}

// ErrInvalidSpec is what every error of Validate is (errors.Is).
var ErrInvalidSpec = errors.New("invalid declared view")

// SpecError is one problem of a Spec: the spec's field it is about
// ("columns[1].value") and what is wrong.
type SpecError struct {
	Field, Message string
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalidSpec) hold.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// Validate returns every problem of the spec at once: the *SpecErrors,
// joined (errors.Join).
func (s Spec) Validate() error {
	var errs []error
	problem := func(field, format string, args ...any) {
		errs = append(errs, &SpecError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if s.View == "" {
		problem("view", "missing")
	}
	for _, field := range slices.Sorted(maps.Keys(s.Filter)) {
		if !IsFieldName(field) {
			problem("filter."+field, "%q: want a field name (letters, digits and _, not starting with a digit)", field)
		}
		if len(s.Filter[field]) == 0 {
			problem("filter."+field, "no value: want a string, an integer, a boolean, or a list of them")
		}
	}
	if s.Key.Column == "" {
		problem("key.column", "missing")
	}
	if t, ok := lookupType(s.Key.Type); !ok || (t.kind != kindText && t.kind != kindInt) {
		problem("key.type", "%q: a declared view's key is text, varchar, ascii, bigint, int, smallint or tinyint", s.Key.Type)
	}
	switch {
	case s.Key.Field == "":
		problem("key.field", "missing: name the event field that keys the view")
	case !IsFieldName(s.Key.Field):
		problem("key.field", "%q: want a field name (letters, digits and _, not starting with a digit)", s.Key.Field)
	}
	if len(s.Columns) == 0 {
		problem("columns", "missing: a declared view needs at least one column")
	}
	for i, c := range s.Columns {
		field := fmt.Sprintf("columns[%d]", i)
		if c.Name == "" {
			problem(field+".name", "missing")
		}
		if sub, msg := c.check(); msg != "" {
			problem(field+"."+sub, "%s", msg)
		}
	}
	return errors.Join(errs...)
}

// check returns the column's problem: the column's field it is about and
// the message, "" when there is none.
func (c ColumnSpec) check() (field, message string) {
	if c.Aggregate.Merge() == "" {
		if c.Aggregate == "" {
			return "aggregate", fmt.Sprintf("missing: say how events fold into column %s (%s)", c.Name, aggregateList())
		}
		return "aggregate", fmt.Sprintf("%q: want %s", c.Aggregate, aggregateList())
	}
	t, ok := lookupType(c.Type)
	if !ok {
		return "type", fmt.Sprintf("%q: a declared column is one of bigint, int, smallint, tinyint, double, float, text, varchar, ascii, timestamp, boolean", c.Type)
	}
	numeric := t.kind == kindInt || t.kind == kindFloat
	switch c.Aggregate {
	case Count, Sum:
		if !numeric {
			return "type", fmt.Sprintf("%s: %s folds into a number column (bigint, int, smallint, tinyint, double, float)", c.Type, c.Aggregate)
		}
		if c.Aggregate == Count {
			if !c.Value.IsZero() {
				return "value", fmt.Sprintf("%s: count adds 1 per event and takes no value (sum adds a value)", c.Value)
			}
			return "", ""
		}
	case Avg:
		if t.kind != kindFloat || strings.ToLower(strings.TrimSpace(c.Type)) != "double" {
			return "type", fmt.Sprintf("%s: avg is a fraction, read as a double: declare the column type double (its sum is stored as a double, its count as a bigint)", c.Type)
		}
	case Min, Max:
		if t.kind == kindBool {
			return "type", fmt.Sprintf("%s: %s of a boolean: use last, or a number column", c.Type, c.Aggregate)
		}
	}
	if c.Value.IsZero() {
		return "value", fmt.Sprintf("missing: %s needs the event field (or expression) it folds", c.Aggregate)
	}
	if _, bare := c.Value.Field(); !bare && !numeric {
		return "value", fmt.Sprintf("%s: a %s column takes one event field, read as %s; arithmetic is for number columns", c.Value, c.Type, c.Type)
	}
	return "", ""
}

func aggregateList() string {
	names := make([]string, len(Aggregates))
	for i, a := range Aggregates {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// Literal is one value a filter compares a field with: a string, an
// integer or a boolean.
type Literal struct {
	v any // string, int64 or bool
}

// NewLiteral returns the literal of v, a string, a Go integer or a bool
// (as YAML decodes a scalar); anything else is an error.
func NewLiteral(v any) (Literal, error) {
	switch x := v.(type) {
	case string:
		return Literal{v: x}, nil
	case bool:
		return Literal{v: x}, nil
	case int:
		return Literal{v: int64(x)}, nil
	case int64:
		return Literal{v: x}, nil
	case uint64:
		if x <= math.MaxInt64 {
			return Literal{v: int64(x)}, nil
		}
	case nil:
		return Literal{}, errors.New("null: want a string, an integer or a boolean")
	}
	return Literal{}, fmt.Errorf("%v: want a string, an integer or a boolean", v)
}

// Value is the literal's Go value: string, int64 or bool.
func (l Literal) Value() any { return l.v }

// String writes the literal as a manifest would.
func (l Literal) String() string { return fmt.Sprint(l.v) }

// MarshalJSON writes the literal as a JSON scalar.
func (l Literal) MarshalJSON() ([]byte, error) { return json.Marshal(l.v) }

// UnmarshalJSON reads a JSON string, integer or boolean.
func (l *Literal) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if n, ok := v.(json.Number); ok {
		i, err := n.Int64()
		if err != nil {
			return fmt.Errorf("filter value %s: want an integer within the 64-bit range", n)
		}
		v = i
	}
	lit, err := NewLiteral(v)
	if err != nil {
		return fmt.Errorf("filter value %s", err)
	}
	*l = lit
	return nil
}

// ParseSpec reads a spec from its JSON (UserConfigSpec's value) and
// validates it.
func ParseSpec(text string) (Spec, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("reading the declared view's spec: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("reading the declared view's spec: %w", err)
	}
	return s, nil
}

// Encode writes the spec as UserConfigSpec carries it.
func (s Spec) Encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encoding the spec of view %s: %w", s.View, err)
	}
	return string(b), nil
}
