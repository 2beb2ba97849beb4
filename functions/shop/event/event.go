// Package event defines the shop example's domain events once, for the four
// shop transformations, the event generator and the tests: their Go type, the
// strict parser that the validate stage applies to the ledger, and the
// canonical JSON that every later stage reads.
//
// Parse rejects an event with a *FieldError whose text names the field
// ("qty: must be >= 0", "type: unknown \"foo\""), so that the dead-letter
// reason tells an operator what to fix without reading code.
package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
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

// object is an event's fields before they are checked.
type object map[string]json.RawMessage

// Parse decodes and checks one event. Fields the event's type does not use
// are ignored, so producers may add fields without breaking the pipeline; a
// JSON null counts as missing.
func Parse(data []byte) (Event, error) {
	var obj object
	if err := json.Unmarshal(data, &obj); err != nil {
		return Event{}, &FieldError{Problem: "not a JSON object: " + err.Error()}
	}
	if obj == nil {
		return Event{}, &FieldError{Problem: "not a JSON object: null"}
	}
	var e Event
	var err error
	if e.ID, err = obj.text("id"); err != nil {
		return Event{}, err
	}
	typ, err := obj.text("type")
	if err != nil {
		return Event{}, err
	}
	e.Type = Type(typ)
	if e.User, err = obj.text("user"); err != nil {
		return Event{}, err
	}
	if e.Time, err = obj.time("time"); err != nil {
		return Event{}, err
	}
	switch e.Type {
	case PageView:
		e.URL, err = obj.text("url")
	case AddToCart:
		if e.SKU, err = obj.text("sku"); err == nil {
			e.Qty, err = obj.integer("qty", MaxQty)
		}
	case Purchase:
		if e.Order, err = obj.text("order"); err != nil {
			break
		}
		if e.SKU, err = obj.text("sku"); err != nil {
			break
		}
		if e.Qty, err = obj.integer("qty", MaxQty); err != nil {
			break
		}
		e.PriceCents, err = obj.integer("price_cents", MaxPriceCents)
	case Refund:
		if e.Order, err = obj.text("order"); err == nil {
			e.AmountCents, err = obj.integer("amount_cents", MaxAmountCents)
		}
	default:
		err = &FieldError{Field: "type", Problem: "unknown " + strconv.Quote(typ)}
	}
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// raw returns a field's JSON, or a "missing" error when it is absent or null.
func (o object) raw(field string) (json.RawMessage, error) {
	v, ok := o[field]
	if !ok || string(v) == "null" {
		return nil, &FieldError{Field: field, Problem: "missing"}
	}
	return v, nil
}

// text reads a required, non-empty string.
func (o object) text(field string) (string, error) {
	v, err := o.raw(field)
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", &FieldError{Field: field, Problem: "must be a string"}
	}
	if s == "" {
		return "", &FieldError{Field: field, Problem: "missing"}
	}
	return s, nil
}

// time reads a required RFC 3339 timestamp (fractions of a second optional).
func (o object) time(field string) (time.Time, error) {
	v, err := o.raw(field)
	if err != nil {
		return time.Time{}, err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return time.Time{}, &FieldError{Field: field, Problem: "must be a string"}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &FieldError{Field: field, Problem: "not RFC 3339"}
	}
	return t.UTC(), nil
}

// integer reads a required whole number in [0, max].
func (o object) integer(field string, max int64) (int64, error) {
	v, err := o.raw(field)
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

// Wire shapes of each type, in the field order of the shop's documentation,
// so that MarshalJSON is deterministic and carries exactly the type's fields.
type (
	common struct {
		ID   string `json:"id"`
		Type Type   `json:"type"`
		User string `json:"user"`
		Time string `json:"time"`
	}
	pageViewJSON struct {
		common
		URL string `json:"url"`
	}
	addToCartJSON struct {
		common
		SKU string `json:"sku"`
		Qty int64  `json:"qty"`
	}
	purchaseJSON struct {
		common
		Order      string `json:"order"`
		SKU        string `json:"sku"`
		Qty        int64  `json:"qty"`
		PriceCents int64  `json:"price_cents"`
	}
	refundJSON struct {
		common
		Order       string `json:"order"`
		AmountCents int64  `json:"amount_cents"`
	}
)

// MarshalJSON writes the canonical form: the type's fields only, the time in
// UTC RFC 3339 with as many fractional digits as it needs. Parse reads it
// back to an equal Event.
func (e Event) MarshalJSON() ([]byte, error) {
	c := common{ID: e.ID, Type: e.Type, User: e.User, Time: e.Time.UTC().Format(time.RFC3339Nano)}
	switch e.Type {
	case PageView:
		return json.Marshal(pageViewJSON{c, e.URL})
	case AddToCart:
		return json.Marshal(addToCartJSON{c, e.SKU, e.Qty})
	case Purchase:
		return json.Marshal(purchaseJSON{c, e.Order, e.SKU, e.Qty, e.PriceCents})
	case Refund:
		return json.Marshal(refundJSON{c, e.Order, e.AmountCents})
	}
	return nil, fmt.Errorf("encoding shop event %s: %w", e.ID, &FieldError{Field: "type", Problem: "unknown " + strconv.Quote(string(e.Type))})
}
