// Package enrichpurchases is the shop stage valid → enriched-purchases: an
// enrichment kept as the user's state (transform.NewStateful, keyed by
// user, as validate keys the valid events). The state of a user is the
// number of page views the ledger has shown of them so far; each purchase
// goes on carrying that number, page_views_before, re-keyed by sku: the
// page views of its user before it in the ledger, exactly as a fold of the
// ledger up to the purchase's position counts them.
//
// Other events (add_to_cart, refund) change nothing and give nothing. The
// view sku_page_views_before (manifests/views, declared in YAML) folds the
// enriched purchases per sku.
package enrichpurchases

import (
	"fmt"
	"strconv"
	"time"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// State is a user's state: their page views so far.
type State struct {
	PageViews int64 `json:"page_views,omitempty"`
}

// Purchase is an enriched purchase, the record the stage emits: the
// purchase's own fields as the canonical event has them, and the user's
// page views before it.
type Purchase struct {
	ID         string     `json:"id"`
	Type       event.Type `json:"type"`
	User       string     `json:"user"`
	Time       time.Time  `json:"time"`
	Order      string     `json:"order"`
	SKU        string     `json:"sku"`
	Qty        int64      `json:"qty"`
	PriceCents int64      `json:"price_cents"`
	// PageViewsBefore counts the page_view events of User before this
	// purchase in the ledger.
	PageViewsBefore int64 `json:"page_views_before"`
}

// Transformation is the enrich-purchases stage.
var Transformation = transform.NewStateful(event.Parse, enrich)

func enrich(state State, in transform.Input[event.Event]) (State, []transform.Output, error) {
	e := in.Event
	if in.Key != e.User {
		// The state is the message key's: an event about another user
		// would count against the wrong one (valid is keyed by user).
		return state, nil, fmt.Errorf("event %s is about user %s but keyed by %s: want the valid events, keyed by user",
			strconv.Quote(e.ID), strconv.Quote(e.User), strconv.Quote(in.Key))
	}
	switch e.Type {
	case event.PageView:
		state.PageViews++
		return state, nil, nil
	case event.Purchase:
		p := Purchase{ID: e.ID, Type: e.Type, User: e.User, Time: e.Time.UTC(), Order: e.Order, SKU: e.SKU,
			Qty: e.Qty, PriceCents: e.PriceCents, PageViewsBefore: state.PageViews}
		return state, []transform.Output{transform.Emit(e.SKU, p).At(e.Time)}, nil
	}
	return state, nil, nil
}
