// Package useractivity is the shop stage valid → view user_activity: one
// view operation per event on the user's row (columns and merge rules in the
// shop package's documentation).
package useractivity

import (
	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// The view and its columns.
const (
	View          = "user_activity"
	ColUser       = "user"
	ColPageViews  = "page_views"
	ColCartUnits  = "cart_units"
	ColPurchases  = "purchases"
	ColSpentCents = "spent_cents"
	ColLastSeen   = "last_seen"
	ColLastURL    = "last_url"
)

// Transformation is the user-activity stage.
var Transformation = transform.New(event.Parse, activity)

func activity(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	seen := transform.Max(ColLastSeen, e.Time)
	var cols []transform.Column
	switch e.Type {
	case event.PageView:
		cols = []transform.Column{transform.Add(ColPageViews, 1), seen, transform.Set(ColLastURL, e.URL)}
	case event.AddToCart:
		cols = []transform.Column{transform.Add(ColCartUnits, e.Qty), seen}
	case event.Purchase:
		cols = []transform.Column{transform.Add(ColPurchases, 1), transform.Add(ColSpentCents, e.Qty*e.PriceCents), seen}
	case event.Refund:
		cols = []transform.Column{transform.Add(ColSpentCents, -e.AmountCents), seen}
	}
	return []transform.Output{transform.Row(View, ColUser, e.User).Apply(cols...).At(e.Time)}, nil
}
