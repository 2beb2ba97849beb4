// Package productsales is the shop stage purchases → view product_sales: one
// view operation per purchase on the sku's row (columns and merge rules in
// the shop package's documentation).
package productsales

import (
	"fmt"
	"strconv"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// The view and its columns.
const (
	View            = "product_sales"
	ColSKU          = "sku"
	ColUnits        = "units"
	ColRevenueCents = "revenue_cents"
	ColOrders       = "orders"
)

// Transformation is the product-sales stage.
var Transformation = transform.New(parsePurchase, sales)

// parsePurchase accepts purchase events only: anything else on the purchases
// topic is a wiring mistake, and goes to the dead-letter topic saying so.
func parsePurchase(payload []byte) (event.Event, error) {
	e, err := event.Parse(payload)
	if err != nil {
		return event.Event{}, err
	}
	if e.Type != event.Purchase {
		return event.Event{}, &event.FieldError{Field: "type", Problem: fmt.Sprintf("want %s, got %s", strconv.Quote(string(event.Purchase)), strconv.Quote(string(e.Type)))}
	}
	return e, nil
}

func sales(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	return []transform.Output{transform.Row(View, ColSKU, e.SKU).Apply(
		transform.Add(ColUnits, e.Qty),
		transform.Add(ColRevenueCents, e.Qty*e.PriceCents),
		transform.Add(ColOrders, 1),
	).At(e.Time)}, nil
}
