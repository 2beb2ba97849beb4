package cassandra

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/textcap"

	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// ErrBadValue marks a value that can never be stored in its column: wrong
// JSON type, out of range, too large. Operations carrying one are dead-lettered.
var ErrBadValue = errors.New("value does not fit its column")

// cqlType is one CQL type a view column may have. Values live in memory in
// one canonical Go type per kind (string, int64, float64, bool, time.Time,
// gocql.UUID) so that folding needs no per-type code paths; bind and scan
// convert to the exact Go type gocql expects for the column.
type cqlType struct {
	name string
	// decode turns a JSON scalar into the canonical Go value.
	decode func(raw json.RawMessage) (any, error)
	// scanDest returns a **T that gocql fills (nil for a null cell), and
	// fromScan reads the canonical value out of it (nil for null).
	scanDest func() any
	fromScan func(dest any) any
	// bind converts a canonical value to what gocql marshals for the column.
	bind func(v any) any
	// min and max bound an integer column's values.
	min, max int64
}

// cqlTypes are the supported column types, by their CQL name.
var cqlTypes = map[string]*cqlType{
	"text":      textType("text", false),
	"varchar":   textType("text", false),
	"ascii":     textType("ascii", true),
	"bigint":    intType("bigint", math.MinInt64, math.MaxInt64, func(v int64) any { return v }, func() any { return new(*int64) }, func(d any) any { return derefInt(*(d.(**int64))) }),
	"int":       intType("int", math.MinInt32, math.MaxInt32, func(v int64) any { return int32(v) }, func() any { return new(*int32) }, func(d any) any { return derefInt(*(d.(**int32))) }),
	"smallint":  intType("smallint", math.MinInt16, math.MaxInt16, func(v int64) any { return int16(v) }, func() any { return new(*int16) }, func(d any) any { return derefInt(*(d.(**int16))) }),
	"tinyint":   intType("tinyint", math.MinInt8, math.MaxInt8, func(v int64) any { return int8(v) }, func() any { return new(*int8) }, func(d any) any { return derefInt(*(d.(**int8))) }),
	"double":    floatType("double", func(v float64) any { return v }, func() any { return new(*float64) }, func(d any) any { return derefFloat(*(d.(**float64))) }),
	"float":     floatType("float", func(v float64) any { return float32(v) }, func() any { return new(*float32) }, func(d any) any { return derefFloat(*(d.(**float32))) }),
	"boolean":   scalarType[bool]("boolean", decodeBool),
	"timestamp": scalarType[time.Time]("timestamp", decodeTimestamp),
	"uuid":      scalarType[gocql.UUID]("uuid", decodeUUID),
}

// lookupType finds a CQL type by name, case-insensitively.
func lookupType(name string) (*cqlType, bool) {
	t, ok := cqlTypes[strings.ToLower(strings.TrimSpace(name))]
	return t, ok
}

// supportedTypes lists the type names for error messages.
func supportedTypes() string {
	return "text, varchar, ascii, bigint, int, smallint, tinyint, double, float, boolean, timestamp, uuid"
}

func textType(name string, asciiOnly bool) *cqlType {
	// Decoded values by their JSON, boxed once.
	decoded := newInterner[any]()
	return &cqlType{
		name: name,
		decode: func(raw json.RawMessage) (any, error) {
			if v, ok := decoded.lookup(raw); ok {
				return v, nil
			}
			s, err := decodeString(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: %s wants a JSON string, got %s", ErrBadValue, name, abbreviate(raw))
			}
			if !utf8.ValidString(s) {
				return nil, fmt.Errorf("%w: %s value is not valid UTF-8", ErrBadValue, name)
			}
			if asciiOnly {
				for i := 0; i < len(s); i++ {
					if s[i] >= 0x80 {
						return nil, fmt.Errorf("%w: ascii value holds a non-ASCII byte at %d", ErrBadValue, i)
					}
				}
			}
			var v any = s
			decoded.store(raw, v)
			return v, nil
		},
		scanDest: func() any { return new(*string) },
		fromScan: func(d any) any {
			if p := *(d.(**string)); p != nil {
				return *p
			}
			return nil
		},
		bind: func(v any) any { return v },
	}
}

func intType(name string, lo, hi int64, bind func(int64) any, scanDest func() any, fromScan func(any) any) *cqlType {
	return &cqlType{
		name: name, min: lo, max: hi,
		decode: func(raw json.RawMessage) (any, error) {
			v, ok := jsonwire.Int(raw)
			if !ok {
				// json.Number would also take a quoted number; a column
				// takes only a JSON number.
				var n json.Number
				raw = bytes.TrimSpace(raw)
				if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
					return nil, fmt.Errorf("%w: %s wants a JSON integer, got %s", ErrBadValue, name, abbreviate(raw))
				}
				var err error
				if v, err = n.Int64(); err != nil {
					return nil, fmt.Errorf("%w: %s wants an integer in [%d, %d], got %s", ErrBadValue, name, lo, hi, n)
				}
			}
			if v < lo || v > hi {
				return nil, fmt.Errorf("%w: %s wants an integer in [%d, %d], got %d", ErrBadValue, name, lo, hi, v)
			}
			return v, nil
		},
		scanDest: scanDest,
		fromScan: fromScan,
		bind:     func(v any) any { return bind(v.(int64)) },
	}
}

func floatType(name string, bind func(float64) any, scanDest func() any, fromScan func(any) any) *cqlType {
	return &cqlType{
		name: name,
		decode: func(raw json.RawMessage) (any, error) {
			var f float64
			if err := json.Unmarshal(raw, &f); err != nil {
				return nil, fmt.Errorf("%w: %s wants a JSON number, got %s", ErrBadValue, name, abbreviate(raw))
			}
			if name == "float" && math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%w: float value %g is out of range", ErrBadValue, f)
			}
			return f, nil
		},
		scanDest: scanDest,
		fromScan: fromScan,
		bind:     func(v any) any { return bind(v.(float64)) },
	}
}

func scalarType[T any](name string, decode func(json.RawMessage) (any, error)) *cqlType {
	return &cqlType{
		name:     name,
		decode:   decode,
		scanDest: func() any { return new(*T) },
		fromScan: func(d any) any {
			if p := *(d.(**T)); p != nil {
				return *p
			}
			return nil
		},
		bind: func(v any) any { return v },
	}
}

func derefInt[T int64 | int32 | int16 | int8](p *T) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func derefFloat[T float64 | float32](p *T) any {
	if p == nil {
		return nil
	}
	return float64(*p)
}

func decodeBool(raw json.RawMessage) (any, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%w: boolean wants true or false, got %s", ErrBadValue, abbreviate(raw))
	}
	return b, nil
}

// decodeString reads a JSON string, without encoding/json when it holds no
// escapes (the common case).
func decodeString(raw json.RawMessage) (string, error) {
	if s, ok := jsonwire.PlainString(raw); ok {
		return s, nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func decodeTimestamp(raw json.RawMessage) (any, error) {
	// CQL timestamps hold milliseconds; truncating here keeps the folded
	// value identical to what a read returns.
	if t, ok := jsonwire.Time(raw); ok {
		return t.Truncate(time.Millisecond), nil
	}
	s, err := decodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: timestamp wants an RFC 3339 string, got %s", ErrBadValue, abbreviate(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Errorf("%w: timestamp wants an RFC 3339 string, got %q", ErrBadValue, s)
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

func decodeUUID(raw json.RawMessage) (any, error) {
	s, err := decodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: uuid wants a string, got %s", ErrBadValue, abbreviate(raw))
	}
	u, err := gocql.ParseUUID(s)
	if err != nil {
		return nil, fmt.Errorf("%w: uuid wants a UUID string, got %q", ErrBadValue, s)
	}
	return u, nil
}

// compareValues orders two non-null canonical values of one column.
func compareValues(a, b any) int {
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		y := b.(int64)
		return cmpOrdered(x, y)
	case float64:
		return cmpOrdered(x, b.(float64))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case time.Time:
		return x.Compare(b.(time.Time))
	case gocql.UUID:
		y := b.(gocql.UUID)
		return bytes.Compare(x[:], y[:])
	}
	panic(fmt.Sprintf("comparing values of unsupported Go type %T", a))
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// equalValues reports whether two canonical values (nil for null) are equal.
func equalValues(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return compareValues(a, b) == 0
}

// addValues adds two canonical numbers of a column, refusing overflow.
func (t *cqlType) addValues(a, b any) (any, error) {
	switch x := a.(type) {
	case int64:
		y := b.(int64)
		s := x + y
		if (y > 0 && s < x) || (y < 0 && s > x) || s < t.min || s > t.max {
			return nil, fmt.Errorf("%w: adding %d to %d overflows %s", ErrBadValue, y, x, t.name)
		}
		return s, nil
	case float64:
		return x + b.(float64), nil
	}
	return nil, fmt.Errorf("%w: merge add needs a numeric column, %s is not", ErrBadValue, t.name)
}

// numeric reports whether merge add applies to the type.
func (t *cqlType) numeric() bool {
	switch t.name {
	case "bigint", "int", "smallint", "tinyint", "double", "float":
		return true
	}
	return false
}

// abbreviate shortens a raw JSON value for an error message, which becomes
// a dead-letter reason and a metric label: valid UTF-8, cut on a rune.
func abbreviate(raw json.RawMessage) string {
	return textcap.Truncate(string(raw), 80)
}
