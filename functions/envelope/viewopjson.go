package envelope

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// This file is the fast path of the ViewOp wire format. Both directions
// match encoding/json exactly and defer to it for whatever they do not
// handle themselves (malformed input, escaped or case-folded field names,
// duplicate fields, values Marshal would rewrite), so encoding/json remains
// the definition of the format and the author of its error messages.

// AppendJSON appends the operation's payload, byte for byte what
// json.Marshal(op) returns, and fails where json.Marshal fails, with its
// error.
func (op ViewOp) AppendJSON(b []byte) ([]byte, error) {
	// The key's columns sorted, as json.Marshal writes a map (nil stays
	// nil: null).
	var buf [4]KeyValue
	var key []KeyValue
	if op.Key != nil {
		key = sortedKey(buf[:0], op.Key)
	}
	return RowOp{View: op.View, Key: key, Kind: op.Kind, EventTime: op.EventTime, Columns: op.Columns}.AppendJSON(b)
}

// AppendJSON appends the operation's payload, byte for byte what
// json.Marshal(op.ViewOp()) returns, and fails where it fails, with its
// error.
func (op RowOp) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = slices.Grow(b, op.sizeHint())
	b = append(b, `{"view":`...)
	b = jsonwire.AppendString(b, op.View)
	b = append(b, `,"key":`...)
	var ok bool
	if b, ok = appendKey(b, op.Key); !ok {
		return marshalViewOp(b[:start], op.ViewOp())
	}
	b = append(b, `,"op":`...)
	b = jsonwire.AppendString(b, string(op.Kind))
	b = append(b, `,"time":"`...)
	tb, err := op.EventTime.AppendText(b)
	if err != nil {
		return marshalViewOp(b[:start], op.ViewOp())
	}
	b = append(tb, '"')
	if len(op.Columns) > 0 {
		b = append(b, `,"columns":[`...)
		for i, c := range op.Columns {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"column":`...)
			b = jsonwire.AppendString(b, c.Column)
			b = append(b, `,"merge":`...)
			b = jsonwire.AppendString(b, string(c.Merge))
			b = append(b, `,"value":`...)
			if b, ok = appendRaw(b, c.Value); !ok {
				return marshalViewOp(b[:start], op.ViewOp())
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// sizeHint is the length of the operation's payload when nothing in it
// needs escaping.
func (op RowOp) sizeHint() int {
	n := len(`{"view":"","key":{},"op":"","time":"2006-01-02T15:04:05.999999999-07:00","columns":[]}`) + len(op.View) + len(op.Kind)
	for _, k := range op.Key {
		n += len(k.Column) + len(k.Value) + len(`"":,`)
	}
	for _, c := range op.Columns {
		n += len(c.Column) + len(c.Merge) + len(c.Value) + len(`{"column":"","merge":"","value":},`)
	}
	return n
}

// marshalViewOp is AppendJSON by encoding/json, for what the fast path does
// not write itself.
func marshalViewOp(b []byte, op ViewOp) ([]byte, error) {
	out, err := json.Marshal(op)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// appendKey writes the key object, whose columns are sorted, as
// json.Marshal writes a map; nil is null. ok is false when a value is not
// canonical.
func appendKey(b []byte, key []KeyValue) (_ []byte, ok bool) {
	if key == nil {
		return append(b, "null"...), true
	}
	b = append(b, '{')
	for i, k := range key {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonwire.AppendString(b, k.Column)
		b = append(b, ':')
		if b, ok = appendRaw(b, k.Value); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendRaw writes a value as json.Marshal writes a json.RawMessage, when
// that is the value itself (nil is null); ok is false otherwise.
func appendRaw(b []byte, raw json.RawMessage) (_ []byte, ok bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if !jsonwire.Canonical(raw) {
		return b, false
	}
	return append(b, raw...), true
}

// field is a member name of the wire format and its bit in a seen-set.
type field struct {
	name string
	bit  uint
}

// The members of a ViewOp and of a ColumnOp.
const (
	fieldView uint = 1 << iota
	fieldKey
	fieldOp
	fieldTime
	fieldColumns
	fieldColumn
	fieldMerge
	fieldValue
)

var (
	opFields     = []field{{"view", fieldView}, {"key", fieldKey}, {"op", fieldOp}, {"time", fieldTime}, {"columns", fieldColumns}}
	columnFields = []field{{"column", fieldColumn}, {"merge", fieldMerge}, {"value", fieldValue}}
)

// failed is nextField's answer for a member name that fieldOf gives up on.
const failed = ^uint(0)

// nextField reads the next member name of an object and returns the bit of
// its field (fieldOf), failed when fieldOf gives up, and ok false at the
// object's end. The first of fields not yet seen is tried first: in the
// order the fields are listed, which is the order AppendJSON writes them,
// a usual payload's names are compared and not read.
func (d *opDecoder) nextField(fields []field, seen uint) (bit uint, ok bool) {
	for _, f := range fields {
		if seen&f.bit == 0 {
			if d.r.NextKeyIs(f.name) {
				return f.bit, true
			}
			break
		}
	}
	name, plain, more := d.r.NextKey()
	if !more {
		return 0, false
	}
	if bit, ok := fieldOf(name, plain, fields); ok {
		return bit, true
	}
	return failed, true
}

// fieldOf returns the bit of the field a member name selects, 0 for an
// unknown member (encoding/json skips it), and ok false for a name that
// encoding/json matches case-insensitively, or might (escaped or not ASCII).
func fieldOf(name []byte, plain bool, fields []field) (bit uint, ok bool) {
	for _, f := range fields {
		if string(name) == f.name {
			return f.bit, true
		}
	}
	if !plain {
		return 0, false
	}
	for _, c := range name {
		if c >= 0x80 {
			return 0, false
		}
	}
	for _, f := range fields {
		if asciiEqualFold(name, f.name) {
			return 0, false
		}
	}
	return 0, true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// opDecoder reads one payload. The strings of a payload are names (of the
// view and its columns), which come from the names the process has seen
// (knownNames) or else are cut from one copy of the payload; raw values are
// cut from another copy, or from the payload itself when aliasRaw; the key
// and columns come from one rowOpArrays while they fit. So a decoded
// operation costs a few allocations whatever its size, and a usual one
// costs one.
type opDecoder struct {
	payload  []byte
	r        jsonwire.Reader
	text     string
	raws     []byte
	aliasRaw bool
	arrays   *rowOpArrays
}

// rowOpArrays holds the key and the columns of a usual operation.
type rowOpArrays struct {
	key     [2]KeyValue
	columns [4]ColumnOp
}

// decodeRowOp reads payload as json.Unmarshal reads it into a ViewOp, the
// key as RowOp holds it; ok is false when it leaves the payload to
// encoding/json.
func decodeRowOp(payload []byte, aliasRaw bool) (op RowOp, ok bool) {
	d := opDecoder{payload: payload, r: jsonwire.NewReader(payload), aliasRaw: aliasRaw}
	r := &d.r
	if !r.Object() {
		return RowOp{}, false
	}
	var seen uint
	for {
		bit, ok := d.nextField(opFields, seen)
		if !ok {
			break
		}
		if bit == failed || seen&bit != 0 {
			return RowOp{}, false
		}
		seen |= bit
		switch bit {
		case 0:
			r.Skip()
		case fieldView:
			op.View = d.string()
		case fieldOp:
			op.Kind = OpKind(d.name(opKinds))
		case fieldTime:
			tok := r.Raw()
			if t, ok := jsonwire.Time(tok); ok {
				op.EventTime = t
			} else if err := op.EventTime.UnmarshalJSON(tok); err != nil {
				r.Fail()
			}
		case fieldKey:
			op.Key = d.key()
		case fieldColumns:
			op.Columns = d.columns()
		}
		if r.Failed() {
			return RowOp{}, false
		}
	}
	if !r.Done() {
		return RowOp{}, false
	}
	return op, true
}

// opKinds and merges are the values of the op and merge members, which
// name reads without copying them.
var (
	opKinds = []string{string(OpApply), string(OpDelete)}
	merges  = []string{string(MergeAdd), string(MergeMax), string(MergeSet), string(MergeLatest), string(MergeMin)}
)

// arr returns the decoder's arrays, allocated at first use.
func (d *opDecoder) arr() *rowOpArrays {
	if d.arrays == nil {
		d.arrays = new(rowOpArrays)
	}
	return d.arrays
}

// key reads the key object, sorted by column, the last of a column named
// twice kept; null is nil.
func (d *opDecoder) key() []KeyValue {
	r := &d.r
	if r.Null() {
		return nil
	}
	if !r.Object() {
		r.Fail()
		return nil
	}
	key := d.arr().key[:0]
	sorted := true
	for {
		name, plain, more := r.NextKey()
		if !more {
			break
		}
		col := d.cut(name, plain)
		if n := len(key); n > 0 && key[n-1].Column >= col {
			sorted = false
		}
		key = append(key, KeyValue{Column: col, Value: d.raw()})
	}
	if !sorted {
		// Stable, so that of equal columns the last stays last.
		slices.SortStableFunc(key, func(x, y KeyValue) int { return strings.Compare(x.Column, y.Column) })
		out := key[:0]
		for i, k := range key {
			if i+1 < len(key) && key[i+1].Column == k.Column {
				continue
			}
			out = append(out, k)
		}
		key = out
	}
	return key
}

// columns reads the columns array; null is a nil slice, [] an empty one.
func (d *opDecoder) columns() []ColumnOp {
	r := &d.r
	if r.Null() {
		return nil
	}
	if !r.Array() {
		r.Fail()
		return nil
	}
	cols := d.arr().columns[:0]
	for r.NextElement() {
		var c ColumnOp
		if !r.Null() { // a null element leaves the column zero
			if !r.Object() {
				r.Fail()
				return nil
			}
			var seen uint
			for {
				bit, ok := d.nextField(columnFields, seen)
				if !ok {
					break
				}
				if bit == failed || seen&bit != 0 {
					r.Fail()
					return nil
				}
				seen |= bit
				switch bit {
				case 0:
					r.Skip()
				case fieldColumn:
					c.Column = d.string()
				case fieldMerge:
					c.Merge = Merge(d.name(merges))
				case fieldValue:
					c.Value = d.raw()
				}
			}
		}
		cols = append(cols, c)
	}
	return cols
}

// name reads a string member as string does, returning the one of names
// it equals rather than a copy.
func (d *opDecoder) name(names []string) string {
	if d.r.Null() {
		return ""
	}
	tok, plain := d.r.String()
	if d.r.Failed() {
		return ""
	}
	if plain {
		for _, n := range names {
			if string(tok[1:len(tok)-1]) == n {
				return n
			}
		}
	}
	return d.cut(tok[1:len(tok)-1], plain)
}

// string reads a string member; null leaves it empty, as encoding/json
// leaves the field as it was.
func (d *opDecoder) string() string {
	if d.r.Null() {
		return ""
	}
	tok, plain := d.r.String()
	if d.r.Failed() {
		return ""
	}
	return d.cut(tok[1:len(tok)-1], plain)
}

// cut returns the string whose quoted content in the payload is s.
func (d *opDecoder) cut(s []byte, plain bool) string {
	off := cap(d.payload) - cap(s)
	if !plain {
		v, err := jsonwire.Unquote(d.payload[off-1 : off+len(s)+1])
		if err != nil {
			d.r.Fail()
		}
		return v
	}
	if name, ok := knownNames.lookup(s); ok {
		return name
	}
	if d.text == "" {
		d.text = string(d.payload)
	}
	name := d.text[off : off+len(s)]
	knownNames.add(name)
	return name
}

// raw reads a value as a json.RawMessage of its own (capped, so appending to
// it cannot reach its neighbours).
func (d *opDecoder) raw() json.RawMessage {
	v := d.r.Raw()
	if d.r.Failed() {
		return nil
	}
	off := cap(d.payload) - cap(v)
	if d.aliasRaw {
		return d.payload[off : off+len(v) : off+len(v)]
	}
	if d.raws == nil {
		d.raws = bytes.Clone(d.payload)
	}
	return d.raws[off : off+len(v) : off+len(v)]
}

// knownNames are the names that decoded operations held: a pipeline's
// views and columns are few and come again in every operation.
var knownNames = newNameTable(1024)

// nameTable is a set of strings that lookups read without a lock and that
// grows, by copying, up to a limit: for a small set read far more often
// than it changes. Safe for concurrent use.
type nameTable struct {
	names atomic.Pointer[map[string]string]
	mu    sync.Mutex
	limit int
}

// Names longer than maxNameBytes are not kept.
const maxNameBytes = 64

func newNameTable(limit int) *nameTable {
	t := &nameTable{limit: limit}
	t.names.Store(&map[string]string{})
	return t
}

// lookup returns the name that b spells, when the table holds it.
func (t *nameTable) lookup(b []byte) (string, bool) {
	name, ok := (*t.names.Load())[string(b)] // no allocation: the compiler reads b in place
	return name, ok
}

// add keeps a copy of name, unless the table is full or the name long.
func (t *nameTable) add(name string) {
	if len(name) > maxNameBytes {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.names.Load()
	if _, ok := old[name]; ok || len(old) >= t.limit {
		return
	}
	names := make(map[string]string, len(old)+1)
	maps.Copy(names, old)
	name = strings.Clone(name) // not the payload's copy, which it would keep alive
	names[name] = name
	t.names.Store(&names)
}
