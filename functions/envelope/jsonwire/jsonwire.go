// Package jsonwire holds the allocation-light JSON primitives behind
// Foldline's hand-written codecs (the view-operation payload in envelope, the
// shop event): a Reader that validates and walks one JSON text without
// reflection, and AppendString, which writes a string exactly as
// encoding/json does.
//
// The Reader is deliberately partial. It reports Failed not only for
// malformed JSON but also for anything its caller chooses not to handle
// (escaped object keys, say); the caller then hands the whole input to
// encoding/json, which decides and words the error. A codec built on it thus
// accepts and rejects exactly what encoding/json does, with the same error
// text, and is only faster on the inputs that matter.
package jsonwire

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// maxDepth bounds the nesting the Reader follows; deeper input fails, and
// encoding/json (which allows more) gets to judge it.
const maxDepth = 512

// Reader walks one JSON text. The zero value reads nothing; use NewReader.
// Once a method finds something it cannot read, the Reader is Failed and
// every later method returns a zero result.
type Reader struct {
	data   []byte
	pos    int
	failed bool
	// first is set by Object and Array and cleared by the first NextKey or
	// NextElement after them; nesting is strict, so one flag serves all
	// levels.
	first bool
}

// NewReader returns a Reader at the start of data.
func NewReader(data []byte) Reader { return Reader{data: data} }

// Failed reports whether the input was malformed or the caller gave up on it
// (Fail).
func (r *Reader) Failed() bool { return r.failed }

// Fail marks the input as one the caller leaves to encoding/json.
func (r *Reader) Fail() { r.failed = true }

// Done reports whether only whitespace is left, failing the Reader if not.
func (r *Reader) Done() bool {
	if r.peek() != 0 || r.pos != len(r.data) {
		r.failed = true
	}
	return !r.failed
}

// peek skips whitespace and returns the next byte, 0 at the end or once
// failed.
func (r *Reader) peek() byte {
	if r.failed {
		return 0
	}
	for r.pos < len(r.data) {
		switch c := r.data[r.pos]; c {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return c
		}
	}
	return 0
}

// Null consumes a null literal if one is next.
func (r *Reader) Null() bool {
	if r.peek() != 'n' {
		return false
	}
	r.literal("null")
	return !r.failed
}

// Object consumes the '{' of an object if one is next.
func (r *Reader) Object() bool {
	if r.peek() != '{' {
		return false
	}
	r.pos++
	r.first = true
	return true
}

// Array consumes the '[' of an array if one is next.
func (r *Reader) Array() bool {
	if r.peek() != '[' {
		return false
	}
	r.pos++
	r.first = true
	return true
}

// NextKey reads the next member name of the object opened by Object and the
// colon after it, returning the raw bytes between the quotes and whether
// they are plain (no escape sequences, valid UTF-8, so the name is the bytes
// themselves). It returns ok false at the closing '}' (consumed) or on
// failure.
func (r *Reader) NextKey() (key []byte, plain, ok bool) {
	if !r.next('}') {
		return nil, false, false
	}
	if r.peek() != '"' {
		r.failed = true
		return nil, false, false
	}
	key, plain = r.str()
	if r.peek() != ':' {
		r.failed = true
		return nil, false, false
	}
	r.pos++
	return key, plain, !r.failed
}

// NextKeyIs is NextKey when the next member is named name (plain, with no
// need of escapes) and written without whitespace, as a canonical writer
// writes it: it then consumes the name and its colon and returns true.
// Otherwise it consumes nothing and returns false, and NextKey reads on. A
// reader that expects the members in a usual order thus skips the general
// reading of their names.
func (r *Reader) NextKeyIs(name string) bool {
	if r.failed {
		return false
	}
	i := r.pos
	if !r.first {
		if i >= len(r.data) || r.data[i] != ',' {
			return false
		}
		i++
	}
	n := len(name)
	if len(r.data)-i < n+3 || r.data[i] != '"' || string(r.data[i+1:i+1+n]) != name || r.data[i+1+n] != '"' || r.data[i+2+n] != ':' {
		return false
	}
	r.pos = i + n + 3
	r.first = false
	return true
}

// NextElement moves to the next element of the array opened by Array. It
// returns false at the closing ']' (consumed) or on failure.
func (r *Reader) NextElement() bool {
	return r.next(']')
}

// next consumes the separator before a member or element, or the closing
// byte; it reports whether a member or element follows.
func (r *Reader) next(closing byte) bool {
	c := r.peek()
	if c == closing {
		r.pos++
		r.first = false
		return false
	}
	if r.first {
		r.first = false
	} else if c == ',' {
		r.pos++
	} else {
		r.failed = true
	}
	return !r.failed
}

// String reads a string value, returning its token with the quotes and
// whether the content is plain (tok[1:len(tok)-1] is then the string). It
// fails on anything but a string.
func (r *Reader) String() (tok []byte, plain bool) {
	if r.peek() != '"' {
		r.failed = true
		return nil, false
	}
	start := r.pos
	_, plain = r.str()
	if r.failed {
		return nil, false
	}
	return r.data[start:r.pos], plain
}

// Raw reads any value, checking its syntax, and returns its bytes without
// surrounding whitespace.
func (r *Reader) Raw() []byte {
	if r.peek() == 0 {
		r.failed = true
		return nil
	}
	start := r.pos
	r.value(0)
	if r.failed {
		return nil
	}
	return r.data[start:r.pos]
}

// Value is Raw that also reports whether the value is a string whose
// content is plain (as String reports it): raw[1:len(raw)-1] is then the
// string, with no need to look at it again.
func (r *Reader) Value() (raw []byte, plain bool) {
	if r.peek() != '"' {
		return r.Raw(), false
	}
	return r.String()
}

// Skip reads any value, checking its syntax.
func (r *Reader) Skip() { r.Raw() }

func (r *Reader) value(depth int) {
	if depth > maxDepth {
		r.failed = true
		return
	}
	switch c := r.peek(); c {
	case '"':
		r.str()
	case '{':
		r.pos++
		if r.peek() == '}' {
			r.pos++
			return
		}
		for {
			if r.peek() != '"' {
				r.failed = true
				return
			}
			r.str()
			if r.peek() != ':' {
				r.failed = true
				return
			}
			r.pos++
			r.value(depth + 1)
			switch r.peek() {
			case ',':
				r.pos++
			case '}':
				r.pos++
				return
			default:
				r.failed = true
				return
			}
		}
	case '[':
		r.pos++
		if r.peek() == ']' {
			r.pos++
			return
		}
		for {
			r.value(depth + 1)
			switch r.peek() {
			case ',':
				r.pos++
			case ']':
				r.pos++
				return
			default:
				r.failed = true
				return
			}
		}
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	default:
		r.number()
	}
}

func (r *Reader) literal(lit string) {
	if len(r.data)-r.pos < len(lit) || string(r.data[r.pos:r.pos+len(lit)]) != lit {
		r.failed = true
		return
	}
	r.pos += len(lit)
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? .
func (r *Reader) number() {
	d := r.data
	i := r.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		r.failed = true
		return
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			r.failed = true
			return
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			r.failed = true
			return
		}
		i = j
	}
	r.pos = i
}

func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// str reads a string whose opening quote is next, returning the bytes between
// the quotes and whether they are plain.
func (r *Reader) str() (content []byte, plain bool) {
	d := r.data
	start := r.pos + 1
	// The common case first: plain ASCII up to the closing quote.
	i := start
	for i < len(d) && plainASCII[d[i]] {
		i++
	}
	if i < len(d) && d[i] == '"' {
		r.pos = i + 1
		return d[start:i], true
	}
	plain = true
	ascii := true
	for ; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			r.pos = i + 1
			content = d[start:i]
			if !ascii && plain {
				plain = utf8.Valid(content)
			}
			return content, plain
		case c == '\\':
			plain = false
			i++
			if i >= len(d) {
				r.failed = true
				return nil, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) || !isHex(d[i+1]) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) {
					r.failed = true
					return nil, false
				}
				i += 4
			default:
				r.failed = true
				return nil, false
			}
		case c < 0x20:
			r.failed = true
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.failed = true
	return nil, false
}

// plainASCII says which bytes stand for themselves in a JSON string and
// are ASCII: all but controls, '"', '\\' and the bytes of multi-byte UTF-8.
var plainASCII = func() (set [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		set[c] = c != '"' && c != '\\'
	}
	return set
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Unquote decodes a string token that String or NextKey found not plain,
// with encoding/json's rules (invalid UTF-8 becomes U+FFFD). tok must be a
// token the Reader accepted, quotes included.
func Unquote(tok []byte) (string, error) {
	var s string
	err := json.Unmarshal(tok, &s)
	return s, err
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as encoding/json.Marshal
// writes it: <, > and & escaped for HTML, invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safeSet[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// safeSet says which ASCII bytes encoding/json writes in a string as is.
var safeSet = func() (set [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		set[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return set
}()

// Canonical reports whether raw is one JSON value that encoding/json.Marshal
// (of a json.RawMessage) writes back byte for byte: a number, literal or
// string, without whitespace around it and without anything Marshal escapes
// for HTML (<, >, &, U+2028, U+2029). Objects and arrays, which Marshal
// compacts, are never canonical here.
func Canonical(raw []byte) bool {
	if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || space(raw[0]) || space(raw[len(raw)-1]) {
		return false
	}
	for _, c := range raw {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 { // 0xE2 leads U+2028 and U+2029
			return false
		}
	}
	r := NewReader(raw)
	r.Skip()
	return r.Done()
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// PlainString returns the string that raw, one JSON string without escapes
// (whitespace around it allowed), holds; ok is false for anything else, which
// the caller leaves to encoding/json.
func PlainString(raw []byte) (s string, ok bool) {
	r := NewReader(raw)
	tok, plain := r.String()
	if !plain || !r.Done() {
		return "", false
	}
	return string(tok[1 : len(tok)-1]), true
}

// Int returns the integer that raw, one JSON number written without fraction
// or exponent (whitespace around it allowed), holds when it fits in an int64;
// ok is false for anything else, which the caller leaves to encoding/json.
func Int(raw []byte) (n int64, ok bool) {
	r := NewReader(raw)
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	start := r.pos
	r.number()
	end := r.pos
	if !r.Done() {
		return 0, false
	}
	digits := raw[start:end]
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) > 18 { // beyond 18 digits an int64 may overflow: not ours
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' { // a fraction or an exponent
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// Time returns the time that tok, a JSON string token (quotes included,
// nothing around them), holds when it is a UTC time in the one form
// Foldline writes, YYYY-MM-DDTHH:MM:SS[.F]Z with 1 to 9 fraction digits:
// exactly what time.Parse(time.RFC3339Nano, …) and time.Time's
// UnmarshalJSON return for it. ok is false for anything else (another zone,
// a date that does not exist, escapes), which the caller hands to them.
func Time(tok []byte) (t time.Time, ok bool) {
	n := len(tok)
	if n < len(`"2006-01-02T15:04:05Z"`) || tok[0] != '"' || tok[n-1] != '"' || tok[n-2] != 'Z' {
		return time.Time{}, false
	}
	s := tok[1 : n-2] // without the quotes and the Z
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := fixedDigits(s[0:4])
	month, ok2 := fixedDigits(s[5:7])
	day, ok3 := fixedDigits(s[8:10])
	hour, ok4 := fixedDigits(s[11:13])
	minute, ok5 := fixedDigits(s[14:16])
	sec, ok6 := fixedDigits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19:]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		f, ok := fixedDigits(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		nsec = f
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// fixedDigits reads a run of decimal digits, all of d.
func fixedDigits(d []byte) (int, bool) {
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days of a month of the proleptic Gregorian
// calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// Members reads the JSON object data and sets out[i] to the raw value of
// its member names[i] (nil when it has none; the last one when it has
// several, as encoding/json's map does). ok is false for anything it does
// not read — not an object, malformed, a member name with escapes — which
// the caller hands to encoding/json instead.
func Members(data []byte, names []string, out []json.RawMessage) (ok bool) {
	clear(out)
	r := NewReader(data)
	if !r.Object() {
		return false
	}
	for {
		key, plain, more := r.NextKey()
		if !more {
			break
		}
		if !plain {
			return false
		}
		raw := r.Raw()
		for i, name := range names {
			if string(key) == name {
				out[i] = raw
			}
		}
	}
	return r.Done()
}
