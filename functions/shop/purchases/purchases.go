// Package purchases is the shop stage valid → purchases: purchase events
// only, re-keyed by sku so that product-sales sees each sku's purchases in
// order on one key.
package purchases

import (
	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// Transformation is the purchases stage.
var Transformation = transform.New(event.Parse, purchases)

func purchases(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	if e.Type != event.Purchase {
		return nil, nil
	}
	return []transform.Output{transform.EmitJSON(e.SKU, e).At(e.Time)}, nil
}
