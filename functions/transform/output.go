package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// Output is one thing a transformation emits: a record for the next topic
// (built by Emit or EmitBytes) or an operation on a view row (built by
// Row(...).Apply or Row(...).Delete). Outputs built from equal arguments are
// equal (reflect.DeepEqual), which keeps table tests short.
type Output struct {
	key       string
	eventTime time.Time
	payload   []byte
	view      *envelope.ViewOp
	err       error
}

// JSONAppender is implemented by record types that encode themselves
// without reflection, such as the shop's events. AppendJSON must append
// exactly what json.Marshal writes for the value.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// Emit returns a record for the output topic with v encoded as JSON (by its
// AppendJSON method if it is a JSONAppender). An empty key keeps the input's
// key.
func Emit(key string, v any) Output {
	if a, ok := v.(JSONAppender); ok {
		if payload, err := a.AppendJSON(nil); err == nil {
			return Output{key: key, payload: payload}
		}
		// json.Marshal fails too, and words the error as before.
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return Output{err: fmt.Errorf("encoding record for key %q: %w", key, err)}
	}
	return Output{key: key, payload: payload}
}

// EmitBytes returns a record for the output topic with the payload as is. An
// empty key keeps the input's key.
func EmitBytes(key string, payload []byte) Output {
	return Output{key: key, payload: bytes.Clone(payload)}
}

// At sets the output's event time; without it the output has the input's.
// For a view operation this is the time that MergeLatest compares.
func (o Output) At(t time.Time) Output {
	o.eventTime = t
	if o.view != nil {
		op := *o.view
		op.EventTime = t
		o.view = &op
	}
	return o
}

// Key is the record's key ("" = the input's). For a view operation it is
// derived from the row's key so that operations on one row stay in order.
func (o Output) Key() string {
	if o.view != nil {
		return rowMessageKey(o.view.Key)
	}
	return o.key
}

// EventTime is the time set with At, zero when the input's applies.
func (o Output) EventTime() time.Time { return o.eventTime }

// Payload is the encoded record, nil for a view operation.
func (o Output) Payload() []byte { return o.payload }

// ViewOp returns the view operation, and false when the output is a record.
func (o Output) ViewOp() (envelope.ViewOp, bool) {
	if o.view == nil {
		return envelope.ViewOp{}, false
	}
	return *o.view, true
}

// Err returns the problem met while building the output, if any; Process
// reports it.
func (o Output) Err() error { return o.err }

// String describes the output for tests and examples, e.g.
// `record sku-7 {"qty":2}` or `user_activity{user="u42"} apply add page_views 1`.
func (o Output) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	var b strings.Builder
	if o.view == nil {
		fmt.Fprintf(&b, "record %q %s", o.key, o.payload)
	} else {
		b.WriteString(o.view.View)
		b.WriteString(displayKey(o.view.Key))
		b.WriteString(" ")
		b.WriteString(string(o.view.Kind))
		for _, c := range o.view.Columns {
			fmt.Fprintf(&b, " %s %s %s", c.Merge, c.Column, c.Value)
		}
	}
	if !o.eventTime.IsZero() {
		b.WriteString(" at ")
		b.WriteString(o.eventTime.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// encode turns the output into a record, filling what it left to the input.
func (o Output) encode(in Message) (Record, error) {
	if o.err != nil {
		return Record{}, o.err
	}
	rec := Record{Key: o.key, EventTime: o.eventTime, Payload: o.payload, Origin: in.Origin}
	if o.view != nil {
		op := *o.view
		if op.EventTime.IsZero() {
			op.EventTime = in.EventTime
		}
		if err := op.Validate(); err != nil {
			return Record{}, err
		}
		payload, err := op.AppendJSON(nil)
		if err != nil {
			return Record{}, fmt.Errorf("encoding view operation on %s: %w", op.View, err)
		}
		rec.Key, rec.EventTime, rec.Payload = rowMessageKey(op.Key), op.EventTime, payload
	}
	if rec.Key == "" {
		rec.Key = in.Key
	}
	if rec.EventTime.IsZero() {
		rec.EventTime = in.EventTime
	}
	return rec, nil
}

// rowMessageKey is the message key of a view operation: the key value itself
// for a one-column string key (so a view keyed like its input stays on the
// same key), the JSON literal for a one-column non-string key, and the
// canonical JSON of the key object otherwise.
func rowMessageKey(key map[string]json.RawMessage) string {
	if len(key) == 1 {
		for _, raw := range key {
			if s, ok := plainString(raw); ok {
				return s
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s
			}
			return string(raw)
		}
	}
	b, _ := json.Marshal(key) // values came from json.Marshal, so they re-encode without error
	return string(b)
}

// plainString returns the string that a JSON string without escapes holds.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(s), true
}

// Number is what Add accepts.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64
}

// Column is one column's part of a view operation, built by Set, Add, Max,
// Min or Latest.
type Column struct {
	op  envelope.ColumnOp
	err error
}

// Set overwrites the column: the operation latest in ledger order wins.
func Set(column string, v any) Column { return newColumn(column, envelope.MergeSet, v) }

// Max keeps the greatest value the column has seen.
func Max(column string, v any) Column { return newColumn(column, envelope.MergeMax, v) }

// Min keeps the smallest value the column has seen.
func Min(column string, v any) Column { return newColumn(column, envelope.MergeMin, v) }

// Latest keeps the value of the operation with the latest event time (ties
// go to the later ledger position).
func Latest(column string, v any) Column { return newColumn(column, envelope.MergeLatest, v) }

// Add adds n to the column (counts and sums; n may be negative).
func Add[N Number](column string, n N) Column {
	return newColumn(column, envelope.MergeAdd, n)
}

func newColumn(column string, merge envelope.Merge, v any) Column {
	raw, err := encodeValue(v)
	if err != nil {
		return Column{err: fmt.Errorf("encoding column %s: %w", column, err)}
	}
	return Column{op: envelope.ColumnOp{Column: column, Merge: merge, Value: raw}}
}

// encodeValue writes a column value as a JSON scalar; times become UTC
// RFC 3339 so that equal instants encode equally.
func encodeValue(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case time.Time:
		// RFC 3339 has nothing that JSON escapes.
		b := append(make([]byte, 0, len(`""`)+len(time.RFC3339Nano)), '"')
		return append(x.UTC().AppendFormat(b, time.RFC3339Nano), '"'), nil
	case string:
		return jsonwire.AppendString(make([]byte, 0, len(x)+2), x), nil
	case bool:
		return strconv.AppendBool(nil, x), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		return nil, fmt.Errorf("value %s is not a scalar", raw)
	}
	return raw, nil
}

// RowRef names one row of a view by its key columns.
type RowRef struct {
	view string
	key  map[string]json.RawMessage
	err  error
}

// Row names the row of view whose key column has the value keyValue. Use And
// for further key columns.
func Row(view, keyColumn string, keyValue any) RowRef {
	return RowRef{view: view}.And(keyColumn, keyValue)
}

// And adds a key column, for views with a composite key.
func (r RowRef) And(keyColumn string, keyValue any) RowRef {
	raw, err := encodeValue(keyValue)
	key := maps.Clone(r.key)
	if key == nil {
		key = make(map[string]json.RawMessage, 1)
	}
	key[keyColumn] = raw
	r.key = key
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("encoding key column %s of view %s: %w", keyColumn, r.view, err)
	}
	return r
}

// Apply merges each column into the row by the column's rule, creating the
// row if it does not exist (an upsert when every column uses Set).
func (r RowRef) Apply(columns ...Column) Output {
	op := r.op(envelope.OpApply)
	op.Columns = make([]envelope.ColumnOp, 0, len(columns))
	for _, c := range columns {
		if c.err != nil {
			return Output{err: c.err}
		}
		op.Columns = append(op.Columns, c.op)
	}
	return r.output(op)
}

// Delete removes the row.
func (r RowRef) Delete() Output {
	return r.output(r.op(envelope.OpDelete))
}

func (r RowRef) op(kind envelope.OpKind) envelope.ViewOp {
	return envelope.ViewOp{View: r.view, Key: maps.Clone(r.key), Kind: kind}
}

func (r RowRef) output(op envelope.ViewOp) Output {
	if r.err != nil {
		return Output{err: r.err}
	}
	return Output{view: &op}
}

// displayKey renders a key as {col=value,...} in column order for String.
func displayKey(key map[string]json.RawMessage) string {
	cols := slices.Sorted(maps.Keys(key))
	var b strings.Builder
	b.WriteByte('{')
	for i, col := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(col)
		b.WriteByte('=')
		b.Write(key[col])
	}
	b.WriteByte('}')
	return b.String()
}
