// Package orders is the shop stage valid → orders: purchases and refunds
// only, re-keyed by order id, so that the sku-refunds join sees each
// order's events on one key, in ledger order.
package orders

import (
	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// Transformation is the orders stage.
var Transformation = transform.New(event.Parse, byOrder)

func byOrder(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	if e.Type != event.Purchase && e.Type != event.Refund {
		return nil, nil
	}
	return []transform.Output{transform.EmitJSON(e.Order, e).At(e.Time)}, nil
}
