// Package skurefunds is the shop stage orders → view sku_refunds: a join
// of each refund with its order's purchase, kept as the order's state
// (transform.NewStateful, keyed by order id). A refund counts against the
// sku of its order's purchase as of the refund's ledger position; a
// refund of an order no purchase precedes goes to the dead-letter topic
// with the reason.
//
// View sku_refunds, key column sku text:
//
//	column          CQL type  merge  value
//	refunds         bigint    add    1 per refund of an order of the sku
//	refunded_cents  bigint    add    amount_cents of each such refund
package skurefunds

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// The view and its columns.
const (
	View             = "sku_refunds"
	ColSKU           = "sku"
	ColRefunds       = "refunds"
	ColRefundedCents = "refunded_cents"
)

// State is an order's state: the sku of its purchase ("" before one).
type State struct {
	SKU string `json:"sku,omitempty"`
}

// ErrUnknownOrder is matched by the error for a refund of an order that no
// purchase precedes in the ledger.
var ErrUnknownOrder = errors.New("no purchase of the order precedes the refund")

// Transformation is the sku-refunds stage.
var Transformation = transform.NewStateful(parseOrderEvent, join)

// parseOrderEvent accepts purchases and refunds only: anything else on the
// orders topic is a wiring mistake, and goes to the dead-letter topic
// saying so.
func parseOrderEvent(payload []byte) (event.Event, error) {
	e, err := event.Parse(payload)
	if err != nil {
		return event.Event{}, err
	}
	if e.Type != event.Purchase && e.Type != event.Refund {
		return event.Event{}, &event.FieldError{Field: "type", Problem: fmt.Sprintf("want %s or %s, got %s",
			strconv.Quote(string(event.Purchase)), strconv.Quote(string(event.Refund)), strconv.Quote(string(e.Type)))}
	}
	return e, nil
}

func join(state State, in transform.Input[event.Event]) (State, []transform.Output, error) {
	e := in.Event
	if e.Type == event.Purchase {
		state.SKU = e.SKU
		return state, nil, nil
	}
	if state.SKU == "" {
		return state, nil, fmt.Errorf("order %s: %w", strconv.Quote(e.Order), ErrUnknownOrder)
	}
	return state, []transform.Output{transform.Row(View, ColSKU, state.SKU).Apply(
		transform.Add(ColRefunds, 1),
		transform.Add(ColRefundedCents, e.AmountCents),
	).At(e.Time)}, nil
}
