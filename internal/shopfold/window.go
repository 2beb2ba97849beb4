package shopfold

import "time"

// The shop's windowed views, declared in YAML (manifests/views): each
// column sums its events over a sliding window of event time that moves
// by the hour. Written from the definition, not from the sink's code: a
// window of length W as of time t holds the events whose hour (their time
// rounded down to a whole hour since the Unix epoch) is at most t's hour
// and at least t's hour less W. So it spans between W and W + 1h, and at
// an instant t in the past it includes the events of t's hour after t.

// Purchase is one valid purchase event.
type Purchase struct {
	User, SKU       string
	Qty, PriceCents int64
	Time            time.Time
	// PageViewsBefore counts the valid page views of User before the
	// purchase in the ledger (what enrich-purchases adds to it).
	PageViewsBefore int64
}

// UserPurchasesRow is a row of view user_purchases_7d as of a time; a
// column no event of its window touched is 0 (null in the view).
type UserPurchasesRow struct {
	Purchases7d, SpentCents7d, Purchases1d int64
}

// SKUUnitsRow is a row of view sku_units_1d as of a time.
type SKUUnitsRow struct {
	Units1d int64
}

// viewHop is the hop of the shop's windowed views.
const viewHop = time.Hour

const day = 24 * time.Hour

// InWindow reports whether an event at e falls in the window of length
// window as of at, for a view whose hop is an hour.
func InWindow(e, at time.Time, window time.Duration) bool {
	hour := func(t time.Time) int64 {
		ms, h := t.UnixMilli(), viewHop.Milliseconds()
		if ms < 0 && ms%h != 0 {
			return ms/h - 1
		}
		return ms / h
	}
	last := hour(at)
	first := last - int64(window/viewHop)
	return hour(e) >= first && hour(e) <= last
}

// UserPurchasesAt is view user_purchases_7d as of at: the users with a
// purchase in their 7-day window.
func UserPurchasesAt(purchases []Purchase, at time.Time) map[string]UserPurchasesRow {
	rows := map[string]UserPurchasesRow{}
	for _, p := range purchases {
		if !InWindow(p.Time, at, 7*day) {
			continue
		}
		r := rows[p.User]
		r.Purchases7d++
		r.SpentCents7d += p.Qty * p.PriceCents
		if InWindow(p.Time, at, day) {
			r.Purchases1d++
		}
		rows[p.User] = r
	}
	return rows
}

// SKUUnitsAt is view sku_units_1d as of at: the skus purchased in their
// 1-day window.
func SKUUnitsAt(purchases []Purchase, at time.Time) map[string]SKUUnitsRow {
	rows := map[string]SKUUnitsRow{}
	for _, p := range purchases {
		if InWindow(p.Time, at, day) {
			r := rows[p.SKU]
			r.Units1d += p.Qty
			rows[p.SKU] = r
		}
	}
	return rows
}
