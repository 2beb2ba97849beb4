package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	key string
	// eventTime is the time set with At; for a view operation also the
	// operation's time.
	eventTime time.Time
	payload   []byte
	view      *rowOutput
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

// EmitJSON is Emit of a JSONAppender, the same record, without putting v
// in an interface: for a large struct such as a shop event that saves
// copying it to the heap, once per event.
func EmitJSON[T JSONAppender](key string, v T) Output {
	payload, err := v.AppendJSON(nil)
	if err != nil {
		return Emit(key, v) // which fails as json.Marshal fails
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
	return o
}

// Key is the record's key ("" = the input's). For a view operation it is
// derived from the row's key so that operations on one row stay in order.
func (o Output) Key() string {
	if o.view != nil {
		return o.view.messageKey()
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
	op := o.view.op.ViewOp()
	op.EventTime = o.eventTime
	return op, true
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
		op := &o.view.op
		b.WriteString(op.View)
		b.WriteString(displayKey(op.Key))
		b.WriteString(" ")
		b.WriteString(string(op.Kind))
		for _, c := range op.Columns {
			fmt.Fprintf(&b, " %s %s %s", c.Merge, c.Column, c.Value)
		}
	}
	if !o.eventTime.IsZero() {
		b.WriteString(" at ")
		b.WriteString(o.eventTime.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// encode turns the output into a record, filling what it left to the
// input; a view operation is encoded into the payload when encodeOps is
// set, handed over as Record.Op otherwise.
func (o Output) encode(in Message, encodeOps bool) (Record, error) {
	if o.err != nil {
		return Record{}, o.err
	}
	rec := Record{Key: o.key, EventTime: o.eventTime, Payload: o.payload, Origin: in.Origin}
	if o.view != nil {
		op := o.view.op
		op.EventTime = o.eventTime
		if op.EventTime.IsZero() {
			op.EventTime = in.EventTime
		}
		if err := op.Validate(); err != nil {
			return Record{}, err
		}
		rec.Key, rec.EventTime = o.view.messageKey(), op.EventTime
		if !encodeOps && encodable(op.EventTime) {
			op.EventTime = op.EventTime.Round(0) // the instant, as the wire keeps it
			rec.Op = &op
		} else {
			payload, err := op.AppendJSON(nil)
			if err != nil {
				return Record{}, fmt.Errorf("encoding view operation on %s: %w", op.View, err)
			}
			rec.Payload = payload
		}
	}
	if rec.Key == "" {
		rec.Key = in.Key
	}
	if rec.EventTime.IsZero() {
		rec.EventTime = in.EventTime
	}
	return rec, nil
}

// encodable reports whether RFC 3339 holds t, the one part of an operation
// that Apply or Delete built whose encoding can fail: ProcessOps leaves an
// operation at such a time to the encoding, which fails as Process fails.
func encodable(t time.Time) bool {
	var tmp [64]byte
	_, err := t.AppendText(tmp[:0])
	return err == nil
}

// rowMessageKey is the message key of a view operation: the key value itself
// for a one-column string key (so a view keyed like its input stays on the
// same key), the JSON literal for a one-column non-string key, and the
// canonical JSON of the key object otherwise.
func rowMessageKey(key []envelope.KeyValue) string {
	if len(key) == 1 {
		raw := key[0].Value
		if s, ok := plainString(raw); ok {
			return s
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	b, _ := json.Marshal(envelope.RowOp{Key: key}.ViewOp().Key) // values came from json.Marshal, so they re-encode without error
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
// Min or Latest. Its value is encoded when it is built, and held inline
// when short, so that building an operation allocates nothing per value.
type Column struct {
	column string
	merge  envelope.Merge
	value  scalar
	err    error
}

// Set overwrites the column: the operation latest in ledger order wins.
func Set[T any](column string, v T) Column { return newColumn(column, envelope.MergeSet, v) }

// Max keeps the greatest value the column has seen.
func Max[T any](column string, v T) Column { return newColumn(column, envelope.MergeMax, v) }

// Min keeps the smallest value the column has seen.
func Min[T any](column string, v T) Column { return newColumn(column, envelope.MergeMin, v) }

// Latest keeps the value of the operation with the latest event time (ties
// go to the later ledger position).
func Latest[T any](column string, v T) Column { return newColumn(column, envelope.MergeLatest, v) }

// Add adds n to the column (counts and sums; n may be negative).
func Add[N Number](column string, n N) Column {
	return newColumn(column, envelope.MergeAdd, n)
}

func newColumn[T any](column string, merge envelope.Merge, v T) Column {
	value, err := newScalar(v)
	if err != nil {
		return Column{err: fmt.Errorf("encoding column %s: %w", column, err)}
	}
	return Column{column: column, merge: merge, value: value}
}

// scalarInline is the longest encoded value a scalar holds inline: a
// quoted RFC 3339 time with nanoseconds in UTC.
const scalarInline = len(`"2006-01-02T15:04:05.999999999Z"`)

// scalar is a value encoded as a JSON scalar (encodeValue), inline when it
// is at most scalarInline bytes long.
type scalar struct {
	short [scalarInline]byte
	n     uint8
	long  json.RawMessage // nil when the value is inline
	// text is the value when it is a Go string of valid UTF-8: what the
	// message key of a row keyed by it is (rowMessageKey).
	text   string
	isText bool
}

func newScalar[T any](v T) (scalar, error) {
	var tmp [scalarInline]byte // on the stack: raw is copied, not kept
	raw, err := appendValue(tmp[:0], v)
	if err != nil {
		return scalar{}, err
	}
	var s scalar
	if len(raw) <= scalarInline {
		s.n = uint8(copy(s.short[:], raw))
	} else {
		s.long = bytes.Clone(raw)
	}
	if x, ok := any(v).(string); ok && utf8.ValidString(x) {
		s.text, s.isText = x, true
	}
	return s, nil
}

// raw returns the encoded value; an inline one is copied into buf when it
// has room, else into memory of its own.
func (s *scalar) raw(buf *rowOutput) json.RawMessage {
	if s.long != nil {
		return s.long
	}
	return buf.hold(s.short[:s.n])
}

// encodeValue writes a column value as a JSON scalar; times become UTC
// RFC 3339 so that equal instants encode equally.
func encodeValue(v any) (json.RawMessage, error) {
	return appendValue(nil, v)
}

// appendValue appends what encodeValue returns for v. It grows b only when
// the value does not fit, so that a short value costs nothing in a buffer
// of scalarInline bytes.
func appendValue[T any](b []byte, v T) ([]byte, error) {
	switch x := any(v).(type) {
	case time.Time:
		// RFC 3339 has nothing that JSON escapes.
		return append(x.UTC().AppendFormat(append(b, '"'), time.RFC3339Nano), '"'), nil
	case string:
		return jsonwire.AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		return nil, fmt.Errorf("value %s is not a scalar", raw)
	}
	return append(b, raw...), nil
}

// RowRef names one row of a view by its key columns.
type RowRef struct {
	view string
	// first is the key column Row names, rest those And adds (none
	// repeated: And replaces a column it is given again).
	first keyPart
	rest  []keyPart
	err   error
}

type keyPart struct {
	column string
	value  scalar
}

// Row names the row of view whose key column has the value keyValue. Use And
// for further key columns.
func Row[T any](view, keyColumn string, keyValue T) RowRef {
	value, err := newScalar(keyValue)
	r := RowRef{view: view, first: keyPart{column: keyColumn, value: value}}
	if err != nil {
		r.err = keyError(keyColumn, view, err)
	}
	return r
}

// And adds a key column, for views with a composite key.
func (r RowRef) And(keyColumn string, keyValue any) RowRef {
	value, err := newScalar(keyValue)
	part := keyPart{column: keyColumn, value: value}
	switch i := slices.IndexFunc(r.rest, func(p keyPart) bool { return p.column == keyColumn }); {
	case keyColumn == r.first.column:
		r.first = part
	case i >= 0:
		r.rest = slices.Clone(r.rest)
		r.rest[i] = part
	default:
		r.rest = append(r.rest[:len(r.rest):len(r.rest)], part)
	}
	if err != nil && r.err == nil {
		r.err = keyError(keyColumn, r.view, err)
	}
	return r
}

func keyError(keyColumn, view string, err error) error {
	return fmt.Errorf("encoding key column %s of view %s: %w", keyColumn, view, err)
}

// Apply merges each column into the row by the column's rule, creating the
// row if it does not exist (an upsert when every column uses Set).
func (r RowRef) Apply(columns ...Column) Output {
	for _, c := range columns {
		if c.err != nil {
			return Output{err: c.err}
		}
	}
	if r.err != nil {
		return Output{err: r.err}
	}
	v := r.row(envelope.OpApply)
	v.op.Columns = v.columns[:0]
	if len(columns) > len(v.columns) {
		v.op.Columns = make([]envelope.ColumnOp, 0, len(columns))
	}
	for i := range columns {
		c := &columns[i]
		v.op.Columns = append(v.op.Columns, envelope.ColumnOp{Column: c.column, Merge: c.merge, Value: c.value.raw(v)})
	}
	return Output{view: v}
}

// Delete removes the row.
func (r RowRef) Delete() Output {
	if r.err != nil {
		return Output{err: r.err}
	}
	return Output{view: r.row(envelope.OpDelete)}
}

// row starts the operation on the row: its view, kind and key.
func (r RowRef) row(kind envelope.OpKind) *rowOutput {
	v := &rowOutput{op: envelope.RowOp{View: r.view, Kind: kind}}
	if len(r.rest) == 0 && r.first.value.isText {
		v.msgKey, v.msgKnown = r.first.value.text, true
	}
	key := v.key[:0]
	if 1+len(r.rest) > len(v.key) {
		key = make([]envelope.KeyValue, 0, 1+len(r.rest))
	}
	key = append(key, envelope.KeyValue{Column: r.first.column, Value: r.first.value.raw(v)})
	for i := range r.rest {
		key = append(key, envelope.KeyValue{Column: r.rest[i].column, Value: r.rest[i].value.raw(v)})
	}
	slices.SortFunc(key, func(a, b envelope.KeyValue) int { return strings.Compare(a.Column, b.Column) })
	v.op.Key = key
	return v
}

// rowOutput is a view operation as Apply or Delete built it; outputs
// share it, and nothing changes it afterwards. Its time is the Output's.
// The key, the columns and the short values live in its own arrays when
// they fit, so that an operation costs one allocation.
type rowOutput struct {
	op envelope.RowOp
	// msgKey is the message key when msgKnown; rowMessageKey otherwise.
	msgKey   string
	msgKnown bool
	key      [2]envelope.KeyValue
	columns  [4]envelope.ColumnOp
	values   [96]byte
	used     int
}

// hold returns a copy of an encoded value, in v's own bytes when they
// have room.
func (v *rowOutput) hold(raw []byte) json.RawMessage {
	n := len(raw)
	if v.used+n > len(v.values) {
		return bytes.Clone(raw)
	}
	dst := v.values[v.used : v.used+n : v.used+n]
	copy(dst, raw)
	v.used += n
	return dst
}

// messageKey is the operation's message key (rowMessageKey of its key).
func (v *rowOutput) messageKey() string {
	if v.msgKnown {
		return v.msgKey
	}
	return rowMessageKey(v.op.Key)
}

// displayKey renders a key, whose columns are sorted, as {col=value,...}
// for String.
func displayKey(key []envelope.KeyValue) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range key {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k.Column)
		b.WriteByte('=')
		b.Write(k.Value)
	}
	b.WriteByte('}')
	return b.String()
}
