// Package shop is the example pipeline that the demo, the end-to-end tests
// and the benchmarks use. Its tenant is "shop"; its views live in the
// Cassandra keyspace "shop". The events (package event) are JSON objects, one
// per ledger message, keyed by user:
//
//	{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/p/sku-7"}
//	{"id":"e-2","type":"add_to_cart","user":"u42","time":"…","sku":"sku-7","qty":2}
//	{"id":"e-3","type":"purchase","user":"u42","time":"…","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}
//	{"id":"e-4","type":"refund","user":"u42","time":"…","order":"o-1","amount_cents":1999}
//
// The DAG, one package (and one function) per stage:
//
//		ledger ──► dedup ──► distinct ──► validate ──► valid ──┬──► user-activity ──► view user_activity
//		                                                       ├──► purchases ──► purchases ──► product-sales ──► view product_sales
//		                                                       ├──► orders ──► orders ──► sku-refunds ──► view sku_refunds
//		                                                       └──► enrich-purchases ──► enriched-purchases ──► view sku_page_views_before (declared)
//
//	  - dedup (functions/dedup, the tenant's eventId is id): each event once
//	    per user and id, whoever published it how often.
//	  - validate: parses each ledger event strictly; a bad one goes to the
//	    dead-letter topic with a reason that names the field. Valid events go
//	    on in canonical JSON, keyed by user, with the event's time.
//	  - user-activity: one view operation per event on user_activity.
//	  - purchases: purchase events only, re-keyed by sku.
//	  - product-sales: one view operation per purchase on product_sales.
//	  - orders: purchases and refunds only, re-keyed by order id.
//	  - sku-refunds: stateful, keyed by order id (its state: the sku of the
//	    order's purchase); one view operation per refund on sku_refunds, on
//	    the row of its order's sku as of the refund; a refund of an order no
//	    purchase precedes goes to the dead-letter topic with the reason.
//	  - enrich-purchases: stateful, keyed by user (its state: the user's page
//	    views so far); each purchase goes on, re-keyed by sku, with
//	    page_views_before, its user's page views before it in the ledger.
//	    The view sku_page_views_before is declared in YAML over them.
//
// View user_activity, key column user text:
//
//	column       CQL type   merge   value
//	page_views   bigint     add     1 per page_view
//	cart_units   bigint     add     qty of each add_to_cart
//	purchases    bigint     add     1 per purchase
//	spent_cents  bigint     add     qty×price_cents per purchase, −amount_cents per refund
//	last_seen    timestamp  max     the event's time, for every event
//	last_url     text       set     url of each page_view (the last in ledger order wins)
//
// last_seen is the latest event time, which max of the time value gives
// exactly whatever order the events arrive in (latest, whose value is the
// op's own event time, would give the same). A column that no event of the
// user has touched stays null: a user who never viewed a page has a null
// page_views and last_url.
//
// View product_sales, key column sku text:
//
//	column         CQL type  merge  value
//	units          bigint    add    qty of each purchase
//	revenue_cents  bigint    add    qty×price_cents of each purchase
//	orders         bigint    add    1 per purchase
//
// View sku_refunds, key column sku text: refunds (add, 1 per refund) and
// refunded_cents (add, amount_cents per refund), see package skurefunds.
//
// View sku_page_views_before, key column sku text: purchases (count) and
// page_views_before (sum of each purchase's page_views_before), see
// package enrichpurchases; the average is page_views_before / purchases.
//
// Every view's value after any number of events equals a plain fold of the
// ledger in ledger order; internal/shopfold is that fold, and this package's
// test checks the transformations against it.
package shop
