package envelope

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// This file is the local form of a view operation: what the last function
// of a local chain (transform/run.MainChain) hands the process that folds
// its operations (admin/internal/localrun) instead of the operation's
// JSON, which costs both sides several times more to write and to read. It
// never travels on a topic: the deployed sink reads JSON only
// (DecodeRowOp).
//
// A local payload is localMagic, then the view, the kind, the event time
// (Unix seconds and nanoseconds), the key's columns and values and the
// columns' names, merges and values: counts and times as varints, strings
// and values as a uvarint length and their bytes. An operation whose JSON
// would not be its values as they are (a value encoding/json would
// rewrite) or that JSON cannot hold (a time beyond RFC 3339) is its JSON
// instead, which DecodeLocalRowOp reads as DecodeRowOp does.

// localMagic starts a local payload: no JSON text starts with it.
const localMagic = 0xF1

// ErrLocalOp is wrapped by DecodeLocalRowOp's errors about a malformed
// local payload.
var ErrLocalOp = errors.New("malformed local view operation")

// AppendLocal appends the operation's local payload (see above). It fails
// where AppendJSON fails.
func (op RowOp) AppendLocal(b []byte) ([]byte, error) {
	kind, codes, ok := op.localCodes()
	if !ok {
		return op.AppendJSON(b)
	}
	b = slices.Grow(b, op.localSize())
	b = append(b, localMagic)
	b = appendLocalString(b, op.View)
	b = append(b, kind)
	b = binary.AppendVarint(b, op.EventTime.Unix())
	b = binary.AppendUvarint(b, uint64(op.EventTime.Nanosecond()))
	b = binary.AppendUvarint(b, uint64(len(op.Key)))
	for _, k := range op.Key {
		b = appendLocalString(b, k.Column)
		b = appendLocalValue(b, k.Value)
	}
	b = binary.AppendUvarint(b, uint64(len(op.Columns)))
	for i, c := range op.Columns {
		b = appendLocalString(b, c.Column)
		b = append(b, codes[i])
		b = appendLocalValue(b, c.Value)
	}
	return b, nil
}

// localCodes returns the codes of the operation's kind and of its columns'
// merges (up to localMerges of them; a code is the index in opKinds or
// merges plus one), and false when the operation is not one the local form
// holds as its JSON reads: a kind or merge Validate refuses, a time RFC 3339
// cannot hold, a value that is not canonical JSON, a name that is not UTF-8
// (which JSON would rewrite), a key not sorted by column or naming one
// twice, or too many columns.
func (op RowOp) localCodes() (kind byte, codes [localMerges]byte, ok bool) {
	if kind = codeOf(string(op.Kind), opKinds); kind == 0 || len(op.Columns) > localMerges || !utf8.ValidString(op.View) {
		return 0, codes, false
	}
	if y := op.EventTime.Year(); y < 0 || y > 9999 {
		return 0, codes, false
	}
	for i, k := range op.Key {
		if i > 0 && op.Key[i-1].Column >= k.Column || !utf8.ValidString(k.Column) || !canonical(k.Value) {
			return 0, codes, false
		}
	}
	for i, c := range op.Columns {
		if codes[i] = codeOf(string(c.Merge), merges); codes[i] == 0 || !utf8.ValidString(c.Column) || !canonical(c.Value) {
			return 0, codes, false
		}
	}
	return kind, codes, true
}

// localSize is about the length of the operation's local payload.
func (op RowOp) localSize() int {
	n := 32 + len(op.View)
	for _, k := range op.Key {
		n += 4 + len(k.Column) + len(k.Value)
	}
	for _, c := range op.Columns {
		n += 5 + len(c.Column) + len(c.Value)
	}
	return n
}

// localMerges bounds the columns of an operation in local form.
const localMerges = 64

// codeOf is the code of s among names (its index plus one), 0 for none.
func codeOf(s string, names []string) byte {
	for i, n := range names {
		if s == n {
			return byte(i + 1)
		}
	}
	return 0
}

// canonical reports whether JSON writes v as v (nil as null).
func canonical(v json.RawMessage) bool { return v == nil || jsonwire.Canonical(v) }

func appendLocalString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendLocalValue(b []byte, v json.RawMessage) []byte {
	if v == nil {
		v = json.RawMessage("null")
	}
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// DecodeLocalRowOp reads a payload AppendLocal wrote, or a JSON one as
// DecodeRowOp reads it. A local payload gives the operation its JSON
// gives (the event time in UTC), validated as DecodeRowOp validates it;
// its names come from the names decoded before, its raw values are
// payload's own bytes: payload must not change while the operation is in
// use.
func DecodeLocalRowOp(payload []byte) (RowOp, error) {
	if len(payload) == 0 || payload[0] != localMagic {
		return DecodeRowOp(payload)
	}
	d := localDecoder{buf: payload, pos: 1}
	var op RowOp
	op.View = d.name()
	op.Kind = OpKind(d.code(opKinds, "op"))
	sec, nsec := d.varint(), d.uvarint()
	if d.err == nil && nsec >= uint64(time.Second) {
		d.fail("a nanosecond count of %d", nsec)
	}
	op.EventTime = time.Unix(sec, int64(nsec)).UTC()
	if y := op.EventTime.Year(); d.err == nil && (y < 0 || y > 9999) {
		d.fail("the year %d", y)
	}
	arrays := new(rowOpArrays)
	if n := d.count(); n > 0 {
		op.Key = arrays.key[:0]
		for range n {
			k := KeyValue{Column: d.name(), Value: d.value()}
			if last := len(op.Key) - 1; d.err == nil && last >= 0 && op.Key[last].Column >= k.Column {
				d.fail("key column %q after %q", k.Column, op.Key[last].Column)
			}
			op.Key = append(op.Key, k)
		}
	}
	if n := d.count(); n > 0 {
		op.Columns = arrays.columns[:0]
		for range n {
			op.Columns = append(op.Columns, ColumnOp{Column: d.name(), Merge: Merge(d.code(merges, "merge")), Value: d.value()})
		}
	}
	if d.err == nil && d.pos != len(d.buf) {
		d.fail("%d bytes after the operation", len(d.buf)-d.pos)
	}
	if d.err != nil {
		return RowOp{}, d.err
	}
	if err := op.Validate(); err != nil {
		return RowOp{}, err
	}
	return op, nil
}

// localDecoder reads a local payload; its first error stops it.
type localDecoder struct {
	buf []byte
	pos int
	err error
}

func (d *localDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrLocalOp, fmt.Sprintf(format, args...))
	}
}

func (d *localDecoder) uvarint() uint64 { return number(d, binary.Uvarint) }
func (d *localDecoder) varint() int64   { return number(d, binary.Varint) }

// number reads a number with read (binary.Uvarint or Varint).
func number[T uint64 | int64](d *localDecoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.buf[d.pos:])
	if n <= 0 {
		d.fail("a number at byte %d", d.pos)
		return 0
	}
	d.pos += n
	return v
}

// count reads a count of items, each at least two bytes long.
func (d *localDecoder) count() uint64 {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.buf)-d.pos)/2 {
		d.fail("%d items in %d bytes", n, len(d.buf)-d.pos)
		return 0
	}
	return n
}

// bytes reads a length and as many bytes, in the payload.
func (d *localDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)-d.pos) {
		d.fail("%d bytes at byte %d, beyond the end", n, d.pos)
		return nil
	}
	b := d.buf[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return b
}

// name reads a string, from the names decoded before when it is one.
func (d *localDecoder) name() string {
	b := d.bytes()
	if d.err != nil {
		return ""
	}
	if name, ok := knownNames.lookup(b); ok {
		return name
	}
	if !utf8.Valid(b) {
		d.fail("the name %q is not UTF-8", b)
		return ""
	}
	name := string(b)
	knownNames.add(name)
	return name
}

// code reads the code of one of names.
func (d *localDecoder) code(names []string, what string) string {
	if d.err != nil || d.pos >= len(d.buf) {
		d.fail("no %s at byte %d", what, d.pos)
		return ""
	}
	c := d.buf[d.pos]
	d.pos++
	if c == 0 || int(c) > len(names) {
		d.fail("%s code %d", what, c)
		return ""
	}
	return names[c-1]
}

// value reads a value, which must be one JSON value as JSON writes it.
func (d *localDecoder) value() json.RawMessage {
	v := d.bytes()
	if d.err == nil && !jsonwire.Canonical(v) {
		d.fail("the value %q is not canonical JSON", v)
		return nil
	}
	return v
}
