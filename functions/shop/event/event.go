// Package event defines the shop example's domain events once, for the four
// shop transformations, the event generator and the tests: their Go type, the
// strict parser that the validate stage applies to the ledger, and the
// canonical JSON that every later stage reads. Both directions are written by
// hand (with encoding/json's rules, and encoding/json itself for malformed
// input), since every stage runs them once per event.
//
// Parse rejects an event with a *FieldError whose text names the field
// ("qty: must be >= 0", "type: unknown \"foo\""), so that the dead-letter
// reason tells an operator what to fix without reading code.
package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// Type says what happened.
type Type string

// The shop's event types.
const (
	PageView  Type = "page_view"
	AddToCart Type = "add_to_cart"
	Purchase  Type = "purchase"
	Refund    Type = "refund"
)

// Bounds that keep every sum the views hold far from int64 overflow: a
// quantity or price beyond them is a producer bug, not a sale.
const (
	MaxQty         = 1_000_000
	MaxPriceCents  = 10_000_000_000     // 100 million in currency units
	MaxAmountCents = 10_000_000_000_000 // MaxQty × MaxPriceCents
)

// Size limits. An event or a field beyond them is refused (and so
// dead-lettered with the reason) rather than carried through the pipeline,
// where every stage would copy it and the sink would store it: a single
// outsized event must not grow past the broker's message size on its way.
const (
	MaxEventBytes = 64 << 10 // the whole JSON event
	MaxTextBytes  = 256      // id, type, user, sku and order, decoded
	MaxURLBytes   = 4096     // url, decoded
)

// Event is one shop event. Which fields are set depends on Type:
//
//	page_view:   URL
//	add_to_cart: SKU, Qty
//	purchase:    Order, SKU, Qty, PriceCents
//	refund:      Order, AmountCents
type Event struct {
	ID          string
	Type        Type
	User        string
	Time        time.Time
	URL         string
	SKU         string
	Order       string
	Qty         int64
	PriceCents  int64
	AmountCents int64
}

// ErrInvalid is matched (errors.Is) by every error Parse returns.
var ErrInvalid = errors.New("invalid shop event")

// FieldError says which field of an event is wrong and how. Field is empty
// when the event is not a JSON object at all.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Is makes errors.Is(err, ErrInvalid) true for every FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Parse decodes and checks one event. Fields the event's type does not use
// are ignored, so producers may add fields without breaking the pipeline; a
// JSON null counts as missing.
func Parse(data []byte) (Event, error) {
	if len(data) > MaxEventBytes {
		return Event{}, &FieldError{Problem: fmt.Sprintf("event of %d bytes is larger than the limit of %d", len(data), MaxEventBytes)}
	}
	obj, ok := scanObject(data)
	if !ok {
		// Malformed, or a form the scan leaves alone (escaped member
		// names): encoding/json reads it, and words the error.
		var err error
		if obj, err = decodeObject(data); err != nil {
			return Event{}, err
		}
	}
	return obj.event()
}

// event checks the fields and builds the event.
func (o *fields) event() (Event, error) {
	var e Event
	var err error
	if e.ID, err = o.text(fieldID); err != nil {
		return Event{}, err
	}
	typ, err := o.text(fieldType)
	if err != nil {
		return Event{}, err
	}
	e.Type = Type(typ)
	if e.User, err = o.text(fieldUser); err != nil {
		return Event{}, err
	}
	if e.Time, err = o.time(fieldTime); err != nil {
		return Event{}, err
	}
	switch e.Type {
	case PageView:
		e.URL, err = o.text(fieldURL)
	case AddToCart:
		if e.SKU, err = o.text(fieldSKU); err == nil {
			e.Qty, err = o.integer(fieldQty, MaxQty)
		}
	case Purchase:
		if e.Order, err = o.text(fieldOrder); err != nil {
			break
		}
		if e.SKU, err = o.text(fieldSKU); err != nil {
			break
		}
		if e.Qty, err = o.integer(fieldQty, MaxQty); err != nil {
			break
		}
		e.PriceCents, err = o.integer(fieldPriceCents, MaxPriceCents)
	case Refund:
		if e.Order, err = o.text(fieldOrder); err == nil {
			e.AmountCents, err = o.integer(fieldAmountCents, MaxAmountCents)
		}
	default:
		err = &FieldError{Field: "type", Problem: "unknown " + strconv.Quote(typ)}
	}
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// object is the type encoding/json decodes an event into when the scan
// leaves it alone; its name shows in the error text of a non-object.
type object map[string]json.RawMessage

// The members an event may have, as indexes into fields.raw.
const (
	fieldID = iota
	fieldType
	fieldUser
	fieldTime
	fieldURL
	fieldSKU
	fieldOrder
	fieldQty
	fieldPriceCents
	fieldAmountCents
	numFields
)

var fieldNames = [numFields]string{"id", "type", "user", "time", "url", "sku", "order", "qty", "price_cents", "amount_cents"}

// fields is an event's members before they are checked: each one's JSON
// value, nil when absent.
type fields struct {
	raw [numFields][]byte
	// plain marks the members whose value is a string token without
	// escapes and of valid UTF-8 (jsonwire's plain), as the scan found.
	plain [numFields]bool
	// data is the scanned payload and copy a copy of it that plain strings
	// are cut from; both are empty when encoding/json read the payload.
	data []byte
	copy string
}

// scanObject reads the members an event may have from a JSON object,
// skipping the others (and keeping the last of duplicates, as
// encoding/json does). ok is false when data is not a JSON object or not one
// the scan reads; Parse then hands it to encoding/json.
func scanObject(data []byte) (o fields, ok bool) {
	r := jsonwire.NewReader(data)
	if !r.Object() {
		return o, false
	}
	for next := fieldID; ; {
		// The member the canonical form has next is tried first.
		i := -1
		if next >= 0 && r.NextKeyIs(fieldNames[next]) {
			i = next
		} else {
			name, plain, more := r.NextKey()
			if !more {
				break
			}
			if !plain {
				return o, false
			}
			i = fieldIndex(name)
		}
		if i < 0 {
			r.Skip()
			next = -1
			continue
		}
		o.raw[i], o.plain[i] = r.Value()
		next = o.canonicalAfter(i)
	}
	if !r.Done() {
		return o, false
	}
	o.data, o.copy = data, string(data)
	return o, true
}

// canonicalAfter is the member that follows member i in the canonical
// form (AppendJSON) of the event scanned so far, -1 for none.
func (o *fields) canonicalAfter(i int) int {
	switch i {
	case fieldID, fieldType, fieldUser:
		return i + 1
	case fieldTime:
		switch string(o.raw[fieldType]) {
		case `"page_view"`:
			return fieldURL
		case `"add_to_cart"`:
			return fieldSKU
		case `"purchase"`, `"refund"`:
			return fieldOrder
		}
	case fieldSKU:
		return fieldQty
	case fieldQty:
		if string(o.raw[fieldType]) == `"purchase"` {
			return fieldPriceCents
		}
	case fieldOrder:
		if string(o.raw[fieldType]) == `"purchase"` {
			return fieldSKU
		}
		return fieldAmountCents
	}
	return -1
}

// fieldIndex returns the index of the member with the name, -1 for one that
// events do not have: a guess by length and first letters, then one
// comparison.
func fieldIndex(name []byte) int {
	i := -1
	switch len(name) {
	case 2:
		i = fieldID
	case 3:
		switch name[0] {
		case 'u':
			i = fieldURL
		case 's':
			i = fieldSKU
		case 'q':
			i = fieldQty
		}
	case 4:
		i = fieldType
		switch name[0] {
		case 'u':
			i = fieldUser
		case 't':
			if name[1] == 'i' {
				i = fieldTime
			}
		}
	case 5:
		i = fieldOrder
	case 11:
		i = fieldPriceCents
	case 12:
		i = fieldAmountCents
	}
	if i < 0 || string(name) != fieldNames[i] {
		return -1
	}
	return i
}

// decodeObject reads an event's members with encoding/json.
func decodeObject(data []byte) (fields, error) {
	var m object
	if err := json.Unmarshal(data, &m); err != nil {
		return fields{}, &FieldError{Problem: "not a JSON object: " + err.Error()}
	}
	if m == nil {
		return fields{}, &FieldError{Problem: "not a JSON object: null"}
	}
	var o fields
	for i, name := range fieldNames {
		o.raw[i] = m[name]
	}
	return o, nil
}

// value returns a member's JSON, or a "missing" error when it is absent or
// null.
func (o *fields) value(i int) ([]byte, error) {
	v := o.raw[i]
	if v == nil || string(v) == "null" {
		return nil, &FieldError{Field: fieldNames[i], Problem: "missing"}
	}
	return v, nil
}

// str decodes member i's JSON string v; ok is false when it is not a
// string.
func (o *fields) str(i int, v []byte) (string, bool) {
	if o.copy != "" && o.plain[i] {
		off := cap(o.data) - cap(v) // v lies in data
		return o.copy[off+1 : off+len(v)-1], true
	}
	s, err := jsonwire.Unquote(v)
	return s, err == nil
}

// text reads a required, non-empty string.
func (o *fields) text(i int) (string, error) {
	v, err := o.value(i)
	if err != nil {
		return "", err
	}
	limit := MaxTextBytes
	if i == fieldURL {
		limit = MaxURLBytes
	}
	// An escape is at most 6 bytes for 1: a longer value cannot decode
	// within the limit, and is not decoded at all.
	if len(v) > 6*limit+2 {
		return "", &FieldError{Field: fieldNames[i], Problem: fmt.Sprintf("longer than %d bytes", limit)}
	}
	s, ok := o.str(i, v)
	if !ok {
		return "", &FieldError{Field: fieldNames[i], Problem: "must be a string"}
	}
	if s == "" {
		return "", &FieldError{Field: fieldNames[i], Problem: "missing"}
	}
	if len(s) > limit {
		return "", &FieldError{Field: fieldNames[i], Problem: fmt.Sprintf("longer than %d bytes", limit)}
	}
	return s, nil
}

// time reads a required RFC 3339 timestamp (fractions of a second optional).
func (o *fields) time(i int) (time.Time, error) {
	field := fieldNames[i]
	v, err := o.value(i)
	if err != nil {
		return time.Time{}, err
	}
	if t, ok := jsonwire.Time(v); ok { // the canonical form, in UTC
		return t, nil
	}
	s, ok := o.str(i, v)
	if !ok {
		return time.Time{}, &FieldError{Field: field, Problem: "must be a string"}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &FieldError{Field: field, Problem: "not RFC 3339"}
	}
	// Events are encoded in UTC: a time whose UTC year falls outside
	// 0000–9999 (0000-01-01T00:30:00+01:00 is in year -1) has no RFC 3339
	// form, and the next stage could not read the event back.
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, &FieldError{Field: field, Problem: "outside the years 0000-9999 in UTC"}
	}
	return t.UTC(), nil
}

// integer reads a required whole number in [0, max].
func (o *fields) integer(i int, max int64) (int64, error) {
	field := fieldNames[i]
	v, err := o.value(i)
	if err != nil {
		return 0, err
	}
	// Only a bare number literal counts: encoding/json would also accept a
	// quoted "2" into a json.Number, which is the wrongly typed field that
	// validation exists to catch.
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, &FieldError{Field: field, Problem: "must be a number"}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange) && v[0] == '-':
		return 0, &FieldError{Field: field, Problem: "must be >= 0"}
	case err != nil && errors.Is(err, strconv.ErrRange):
		return 0, &FieldError{Field: field, Problem: fmt.Sprintf("must be <= %d", max)}
	case err != nil:
		return 0, &FieldError{Field: field, Problem: "must be a whole number"}
	case n < 0:
		return 0, &FieldError{Field: field, Problem: "must be >= 0"}
	case n > max:
		return 0, &FieldError{Field: field, Problem: fmt.Sprintf("must be <= %d", max)}
	}
	return n, nil
}

// MarshalJSON writes the canonical form: the type's fields only, in the
// order of the shop's documentation (id, type, user, time, then the type's
// own), the time in UTC RFC 3339 with as many fractional digits as it needs.
// Parse reads it back to an equal Event.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil)
}

// AppendJSON appends the canonical form that MarshalJSON returns, which is
// also what json.Marshal writes for the event (strings escaped as it
// escapes them), without reflection.
func (e Event) AppendJSON(b []byte) ([]byte, error) {
	switch e.Type {
	case PageView, AddToCart, Purchase, Refund:
	default:
		return b, fmt.Errorf("encoding shop event %s: %w", e.ID, &FieldError{Field: "type", Problem: "unknown " + strconv.Quote(string(e.Type))})
	}
	// Room for the members unescaped; the longest time is 35 bytes.
	b = slices.Grow(b, 128+len(e.ID)+len(e.Type)+len(e.User)+len(e.URL)+len(e.SKU)+len(e.Order)+3*20)
	b = appendMember(b, `{"id":`, e.ID)
	b = appendMember(b, `,"type":`, string(e.Type))
	b = appendMember(b, `,"user":`, e.User)
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano) // digits and -:.TZ, nothing to escape
	b = append(b, '"')
	switch e.Type {
	case PageView:
		b = appendMember(b, `,"url":`, e.URL)
	case AddToCart:
		b = appendMember(b, `,"sku":`, e.SKU)
		b = strconv.AppendInt(append(b, `,"qty":`...), e.Qty, 10)
	case Purchase:
		b = appendMember(b, `,"order":`, e.Order)
		b = appendMember(b, `,"sku":`, e.SKU)
		b = strconv.AppendInt(append(b, `,"qty":`...), e.Qty, 10)
		b = strconv.AppendInt(append(b, `,"price_cents":`...), e.PriceCents, 10)
	case Refund:
		b = appendMember(b, `,"order":`, e.Order)
		b = strconv.AppendInt(append(b, `,"amount_cents":`...), e.AmountCents, 10)
	}
	return append(b, '}'), nil
}

// appendMember appends a member's separator and name, then its string value.
func appendMember(b []byte, sepName, value string) []byte {
	return jsonwire.AppendString(append(b, sepName...), value)
}
