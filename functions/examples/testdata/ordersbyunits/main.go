// Command ordersbyunits is a changed product-sales stage for the backfill
// tests: it counts a purchase's units as its orders (where the shop's counts
// one order per purchase), so that a backfill with it must produce a table
// that differs from the live one in a known way.
package main

import (
	"errors"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/shop/productsales"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/run"
)

func parsePurchase(payload []byte) (event.Event, error) {
	e, err := event.Parse(payload)
	if err == nil && e.Type != event.Purchase {
		err = errors.New("not a purchase")
	}
	return e, err
}

func sales(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	return []transform.Output{transform.Row(productsales.View, productsales.ColSKU, e.SKU).Apply(
		transform.Add(productsales.ColUnits, e.Qty),
		transform.Add(productsales.ColRevenueCents, e.Qty*e.PriceCents),
		transform.Add(productsales.ColOrders, e.Qty),
	).At(e.Time)}, nil
}

func main() { run.Main(transform.New(parsePurchase, sales)) }
