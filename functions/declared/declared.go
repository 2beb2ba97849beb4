package declared

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/foldline/foldline/functions/transform"
)

// Program is a validated Spec ready to read events: what the declared
// view's transformation runs, and what lint runs over a sample of events.
// It is safe for concurrent use.
type Program struct {
	spec    Spec
	keyType columnType
	types   []columnType
}

// Compile validates spec and prepares it.
func Compile(spec Spec) (*Program, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p := &Program{spec: spec}
	p.keyType, _ = lookupType(spec.Key.Type)
	for _, c := range spec.Columns {
		t, _ := lookupType(c.Type)
		p.types = append(p.types, t)
	}
	return p, nil
}

// Spec returns the program's spec.
func (p *Program) Spec() Spec { return p.spec }

// Contribution is what one event gives a declared view: nothing when the
// filter leaves it out, else the row's key and each column's value
// (int64, float64, string, bool or time.Time, as the column's type).
type Contribution struct {
	Matched bool
	Key     any
	Values  []any
}

// FieldError is what is wrong, for the spec, with one event: a field the
// key or a column's value needs is missing (or null), has a value of
// another type, or the value does not fit the column. Every FieldError
// matches transform.ErrMalformed (errors.Is): the event goes to the
// dead-letter topic, with the error's text as the reason.
type FieldError struct {
	// Column is the index in Spec.Columns of the column whose value needs
	// the field; -1 for the key.
	Column int
	// Field is the event's field, "" when the problem is the value as a
	// whole (an expression that overflows).
	Field string
	// Missing is set when the event lacks the field (or holds null).
	Missing bool
	// Problem says what is wrong: "is missing", "is a string, want an integer".
	Problem string
	// what names the part of the spec, e.g. "column spent_cents_7d".
	what string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.what + ": " + e.Problem
	}
	return e.what + ": field " + e.Field + " " + e.Problem
}

// Is makes errors.Is(err, transform.ErrMalformed) hold.
func (e *FieldError) Is(target error) bool { return target == transform.ErrMalformed }

// FieldErrors are every FieldError of one event, in the spec's order (the
// key, then the columns). As an error it reads as one line, the problems
// separated by "; ", and matches transform.ErrMalformed.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Is makes errors.Is(err, transform.ErrMalformed) hold.
func (es FieldErrors) Is(target error) bool { return target == transform.ErrMalformed }

// ErrNoEventTime is returned for a message without an event time: a
// declared view folds events by their time (its windows' tiles, last).
var ErrNoEventTime = fmt.Errorf("%w: the message has no event time, which a declared view folds by (its producer must set one; foldline ingest takes it from the event's time field)", transform.ErrMalformed)

// Read decodes one event (a JSON object) and returns its contribution.
// An event the filter leaves out contributes nothing and is no error; one
// the filter keeps but whose fields do not fit the spec gives FieldErrors
// with every problem; a payload that is not a JSON object gives another
// error. Both are about the event: it is dead-lettered.
func (p *Program) Read(payload []byte) (Contribution, error) {
	obj, err := decodeObject(payload)
	if err != nil {
		return Contribution{}, err
	}
	return p.contribution(obj)
}

// decodeObject reads a JSON object's members (the last of duplicates).
func decodeObject(payload []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	return obj, nil
}

// matches reports whether the filter keeps the event.
func (p *Program) matches(obj map[string]json.RawMessage) bool {
	for field, values := range p.spec.Filter {
		raw, ok := present(obj, field)
		if !ok || !matchesAny(raw, values) {
			return false
		}
	}
	return true
}

func matchesAny(raw json.RawMessage, values []Literal) bool {
	for _, l := range values {
		switch want := l.v.(type) {
		case string:
			if s, err := readString(raw); err == nil && s == want {
				return true
			}
		case int64:
			if n, err := readInt(raw); err == nil && n == want {
				return true
			}
		case bool:
			if b, err := readBool(raw); err == nil && b == want {
				return true
			}
		}
	}
	return false
}

// present returns a field's value, false when it is absent or null.
func present(obj map[string]json.RawMessage, field string) (json.RawMessage, bool) {
	raw, ok := obj[field]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (p *Program) contribution(obj map[string]json.RawMessage) (Contribution, error) {
	if !p.matches(obj) {
		return Contribution{}, nil
	}
	var problems FieldErrors
	c := Contribution{Matched: true, Values: make([]any, len(p.spec.Columns))}
	keyWhat := "key " + p.spec.Key.Column
	if raw, ok := present(obj, p.spec.Key.Field); !ok {
		problems = append(problems, &FieldError{Column: -1, Field: p.spec.Key.Field, Missing: true, Problem: "is missing", what: keyWhat})
	} else if v, msg := readAs(raw, p.keyType, p.spec.Key.Type); msg != "" {
		problems = append(problems, &FieldError{Column: -1, Field: p.spec.Key.Field, Problem: msg, what: keyWhat})
	} else if v == "" {
		problems = append(problems, &FieldError{Column: -1, Field: p.spec.Key.Field, Problem: "is empty, which keys no row", what: keyWhat})
	} else {
		c.Key = v
	}
	for i, col := range p.spec.Columns {
		v, err := p.value(obj, i, col)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		c.Values[i] = v
	}
	if len(problems) > 0 {
		return Contribution{}, problems
	}
	return c, nil
}

// value is column i's contribution from the event.
func (p *Program) value(obj map[string]json.RawMessage, i int, col ColumnSpec) (any, *FieldError) {
	t := p.types[i]
	what := "column " + col.Name
	if col.Aggregate == Count {
		return int64(1), nil
	}
	if field, bare := col.Value.Field(); bare && t.kind != kindInt {
		raw, ok := present(obj, field)
		if !ok {
			return nil, &FieldError{Column: i, Field: field, Missing: true, Problem: "is missing", what: what}
		}
		v, msg := readAs(raw, t, col.Type)
		if msg != "" {
			return nil, &FieldError{Column: i, Field: field, Problem: msg, what: what}
		}
		return v, nil
	}
	// An integer expression (for an integer column, or a double's).
	var fieldErr *FieldError
	n, err := col.Value.eval(func(field string) (int64, error) {
		raw, ok := present(obj, field)
		if !ok {
			fieldErr = &FieldError{Column: i, Field: field, Missing: true, Problem: "is missing", what: what}
			return 0, fieldErr
		}
		n, err := readInt(raw)
		if err != nil {
			fieldErr = &FieldError{Column: i, Field: field, Problem: err.Error(), what: what}
			return 0, fieldErr
		}
		return n, nil
	})
	switch {
	case fieldErr != nil:
		return nil, fieldErr
	case err != nil:
		return nil, &FieldError{Column: i, Problem: fmt.Sprintf("%s %v", col.Value, err), what: what}
	case t.kind == kindInt && (n < t.min || n > t.max):
		return nil, &FieldError{Column: i, Problem: fmt.Sprintf("%s is %d, out of the range of %s", col.Value, n, col.Type), what: what}
	}
	return n, nil
}

// readAs reads a JSON value as a column type; the message says what is
// wrong, "" when nothing is.
func readAs(raw json.RawMessage, t columnType, typ string) (any, string) {
	var v any
	var err error
	switch t.kind {
	case kindInt:
		var n int64
		if n, err = readInt(raw); err == nil {
			if n < t.min || n > t.max {
				return nil, fmt.Sprintf("is %d, out of the range of %s", n, typ)
			}
			v = n
		}
	case kindFloat:
		v, err = readFloat(raw)
	case kindText:
		var s string
		if s, err = readString(raw); err == nil {
			if t.ascii && !isASCII(s) {
				return nil, "holds a non-ASCII character, which an ascii column refuses"
			}
			v = s
		}
	case kindTime:
		v, err = readTime(raw)
	case kindBool:
		v, err = readBool(raw)
	}
	if err != nil {
		return nil, err.Error()
	}
	return v, ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// jsonType names a JSON value's type for messages.
func jsonType(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	}
	if strings.ContainsAny(string(raw), ".eE") {
		return "a number with a fraction or exponent"
	}
	return "a number"
}

func readInt(raw json.RawMessage) (int64, error) {
	if !isNumber(raw) || strings.ContainsAny(string(raw), ".eE") {
		return 0, fmt.Errorf("is %s, want an integer", jsonType(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("is an integer out of the 64-bit range")
	}
	return n, nil
}

// isNumber reports whether a JSON value (which encoding/json has checked)
// is a number.
func isNumber(raw json.RawMessage) bool { return raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') }

func readFloat(raw json.RawMessage) (float64, error) {
	if !isNumber(raw) {
		return 0, fmt.Errorf("is %s, want a number", jsonType(raw))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errors.New("is a number out of the range of a double")
	}
	return f, nil
}

func readString(raw json.RawMessage) (string, error) {
	if raw[0] != '"' {
		return "", fmt.Errorf("is %s, want a string", jsonType(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("is not a valid JSON string: %w", err)
	}
	return s, nil
}

func readTime(raw json.RawMessage) (time.Time, error) {
	s, err := readString(raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("is %s, want an RFC 3339 time", jsonType(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("is %q, want an RFC 3339 time such as 2026-11-01T10:00:00Z", s)
	}
	return t, nil
}

func readBool(raw json.RawMessage) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("is %s, want true or false", jsonType(raw))
}

// Transformation is the program as a transformation: each event the
// filter keeps becomes one operation on its row, applying every column's
// contribution at the message's event time.
func (p *Program) Transformation() *transform.Transformation[Contribution] {
	return transform.New(p.Read, p.fold)
}

func (p *Program) fold(in transform.Input[Contribution]) ([]transform.Output, error) {
	c := in.Event
	if !c.Matched {
		return nil, nil
	}
	if in.EventTime.IsZero() {
		return nil, ErrNoEventTime
	}
	columns := make([]transform.Column, 0, len(p.spec.Columns)+1)
	for i, col := range p.spec.Columns {
		columns = column(columns, col, c.Values[i])
	}
	return []transform.Output{transform.Row(p.spec.View, p.spec.Key.Column, c.Key).Apply(columns...).At(in.EventTime)}, nil
}

// column appends one column's part of the operation: an avg column's
// is two, its value to its sum and 1 to its count.
func column(columns []transform.Column, col ColumnSpec, v any) []transform.Column {
	switch col.Aggregate {
	case Count, Sum:
		return append(columns, add(col.Name, v))
	case Avg:
		sum, count := AverageColumns(col.Name)
		return append(columns, add(sum, v), transform.Add(count, int64(1)))
	case Min:
		return append(columns, transform.Min(col.Name, v))
	case Max:
		return append(columns, transform.Max(col.Name, v))
	}
	return append(columns, transform.Latest(col.Name, v))
}

// add is the addition of a number, an int64 or a float64.
func add(name string, v any) transform.Column {
	if f, ok := v.(float64); ok {
		return transform.Add(name, f)
	}
	return transform.Add(name, v.(int64))
}

// FromUserConfig compiles the spec a declared view's function finds in its
// user config (UserConfigSpec).
func FromUserConfig(uc map[string]any) (*Program, error) {
	text, ok := uc[UserConfigSpec].(string)
	if !ok {
		return nil, fmt.Errorf("reading the user config: key %s: want the declared view's spec as JSON text, found %T: %w", UserConfigSpec, uc[UserConfigSpec], ErrInvalidSpec)
	}
	spec, err := ParseSpec(text)
	if err != nil {
		return nil, err
	}
	return Compile(spec)
}
