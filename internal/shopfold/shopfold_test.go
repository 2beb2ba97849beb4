package shopfold_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/shopfold"
)

func lines(s string) [][]byte {
	var out [][]byte
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, []byte(strings.TrimSpace(l)))
	}
	return out
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestFold(t *testing.T) {
	tests := []struct {
		name     string
		events   string
		users    map[string]shopfold.UserActivityRow
		products map[string]shopfold.ProductSalesRow
		rejected []int
	}{
		{
			name: "the issue's four events",
			events: `
				{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/p/sku-7"}
				{"id":"e-2","type":"add_to_cart","user":"u42","time":"2026-11-01T10:01:00Z","sku":"sku-7","qty":2}
				{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:02:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}
				{"id":"e-4","type":"refund","user":"u42","time":"2026-11-01T10:03:00Z","order":"o-1","amount_cents":1999}`,
			users: map[string]shopfold.UserActivityRow{
				"u42": {PageViews: 1, CartUnits: 2, Purchases: 1, SpentCents: 1999, LastSeen: at("2026-11-01T10:03:00Z"), LastURL: "/p/sku-7"},
			},
			products: map[string]shopfold.ProductSalesRow{"sku-7": {Units: 2, RevenueCents: 3998, Orders: 1}},
		},
		{
			name: "last seen is the latest time, last url the last in ledger order",
			events: `
				{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T10:00:05.5+01:00","url":"/a"}
				{"id":"e-2","type":"page_view","user":"u1","time":"2026-11-01T09:00:01Z","url":"/b"}`,
			users: map[string]shopfold.UserActivityRow{
				"u1": {PageViews: 2, LastSeen: at("2026-11-01T09:00:05.5Z"), LastURL: "/b"},
			},
			products: map[string]shopfold.ProductSalesRow{},
		},
		{
			name: "invalid events change nothing",
			events: `
				{"id":"e-1","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":-1,"price_cents":5}
				{"id":"e-2","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":"1","price_cents":5}
				{"id":"e-3","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","sku":"s","qty":1,"price_cents":5}
				{"id":"e-4","type":"teleport","user":"u1","time":"2026-11-01T10:00:00Z"}
				{"id":"e-5","type":"page_view","user":"u1","time":"yesterday","url":"/"}
				{"id":"e-6","type":"page_view","user":"u1","time":"2026-11-01T10:00:00Z","url":"/"} x
				{"id":"e-7","type":"page_view","user":"u1","time":"2026-11-01T10:00:00Z","url":"/"
				{"id":"e-8","type":"add_to_cart","user":"u2","time":"2026-11-01T10:00:00Z","sku":"s","qty":1.5}
				{"type":"add_to_cart","user":"u2","time":"2026-11-01T10:00:00Z","sku":"s","qty":1}
				null
				{"id":"e-9","type":"add_to_cart","user":"u2","time":"2026-11-01T10:00:00Z","sku":"s","qty":0}`,
			users: map[string]shopfold.UserActivityRow{
				"u2": {LastSeen: at("2026-11-01T10:00:00Z")},
			},
			products: map[string]shopfold.ProductSalesRow{},
			rejected: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := shopfold.Fold(lines(tc.events))
			if !reflect.DeepEqual(got.UserActivity, tc.users) {
				t.Errorf("user_activity = %+v\nwant %+v", got.UserActivity, tc.users)
			}
			if !reflect.DeepEqual(got.ProductSales, tc.products) {
				t.Errorf("product_sales = %+v\nwant %+v", got.ProductSales, tc.products)
			}
			if !reflect.DeepEqual(got.Rejected, tc.rejected) {
				t.Errorf("rejected lines %v, want %v", got.Rejected, tc.rejected)
			}
			if got.Accepted+len(got.Rejected) != len(lines(tc.events)) {
				t.Errorf("accepted %d + rejected %d != %d lines", got.Accepted, len(got.Rejected), len(lines(tc.events)))
			}
		})
	}
}

func TestAddSaysWhy(t *testing.T) {
	f := shopfold.NewFolder()
	err := f.Add([]byte(`{"id":"e-1","type":"refund","user":"u1","time":"2026-11-01T10:00:00Z","order":"o"}`))
	if !errors.Is(err, shopfold.ErrRejected) || !strings.Contains(err.Error(), "amount_cents is missing") {
		t.Errorf("got %v", err)
	}
}

// TestFoldDistinct checks that a distinct fold counts each (user, id) once,
// the first line winning whatever its validity, and never skips a line
// without an id.
func TestFoldDistinct(t *testing.T) {
	in := lines(`
		{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T00:00:00Z","url":"/a"}
		{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T00:00:01Z","url":"/b"}
		{"id":"e-1","type":"page_view","user":"u2","time":"2026-11-01T00:00:02Z","url":"/c"}
		{"id":"e-2","type":"nope","user":"u1","time":"2026-11-01T00:00:03Z"}
		{"id":"e-2","type":"page_view","user":"u1","time":"2026-11-01T00:00:04Z","url":"/d"}
		{"id":7,"type":"page_view","user":"u1","time":"2026-11-01T00:00:05Z","url":"/e"}
		{"id":7,"type":"page_view","user":"u1","time":"2026-11-01T00:00:06Z","url":"/f"}
		{"type":"page_view","user":"u1","time":"2026-11-01T00:00:07Z","url":"/g"}
		{"type":"page_view","user":"u1","time":"2026-11-01T00:00:08Z","url":"/h"}
	`)
	got := shopfold.FoldDistinct(in)
	if want := []int{1, 4, 6}; !reflect.DeepEqual(got.Duplicates, want) {
		t.Errorf("duplicates %v, want %v", got.Duplicates, want)
	}
	// A number is an id to deduplicate by but not a valid shop id, and no
	// id at all is validate's rejection, not a duplicate.
	if want := []int{3, 5, 7, 8}; !reflect.DeepEqual(got.Rejected, want) {
		t.Errorf("rejected %v, want %v", got.Rejected, want)
	}
	if u1 := got.UserActivity["u1"]; u1.PageViews != 1 || u1.LastURL != "/a" {
		t.Errorf("u1 = %+v, want 1 page view, /a (e-2's first line was rejected, its second skipped)", u1)
	}
	if u2 := got.UserActivity["u2"]; u2.PageViews != 1 {
		t.Errorf("u2 = %+v: the same id under another user is another event", u2)
	}
	all := shopfold.Fold(in)
	if all.Duplicates != nil || all.UserActivity["u1"].PageViews != 3 {
		t.Errorf("a plain fold skipped something: %+v", all)
	}
	f := shopfold.NewDistinctFolder()
	_ = f.Add(in[0])
	if err := f.Add(in[1]); !errors.Is(err, shopfold.ErrDuplicate) {
		t.Errorf("Add of a duplicate: %v", err)
	}
}

// TestFoldSkuRefunds checks the join of refunds with their orders'
// purchases: the sku as of the refund, unknown orders listed.
func TestFoldSkuRefunds(t *testing.T) {
	got := shopfold.Fold(lines(`
		{"id":"e-1","type":"refund","user":"u1","time":"2026-11-01T00:00:00Z","order":"o-1","amount_cents":5}
		{"id":"e-2","type":"purchase","user":"u1","time":"2026-11-01T00:00:01Z","order":"o-1","sku":"a","qty":1,"price_cents":10}
		{"id":"e-3","type":"refund","user":"u1","time":"2026-11-01T00:00:02Z","order":"o-1","amount_cents":7}
		{"id":"e-4","type":"purchase","user":"u1","time":"2026-11-01T00:00:03Z","order":"o-1","sku":"b","qty":1,"price_cents":10}
		{"id":"e-5","type":"refund","user":"u1","time":"2026-11-01T00:00:04Z","order":"o-1","amount_cents":3}
		{"id":"e-6","type":"purchase","user":"u2","time":"2026-11-01T00:00:05Z","order":"o-2","sku":"c","qty":-1,"price_cents":10}
		{"id":"e-7","type":"refund","user":"u2","time":"2026-11-01T00:00:06Z","order":"o-2","amount_cents":1}
	`))
	want := map[string]shopfold.SkuRefundsRow{"a": {Refunds: 1, RefundedCents: 7}, "b": {Refunds: 1, RefundedCents: 3}}
	if !reflect.DeepEqual(got.SkuRefunds, want) {
		t.Errorf("sku_refunds %+v, want %+v", got.SkuRefunds, want)
	}
	if !reflect.DeepEqual(got.UnknownOrders, []int{0, 6}) {
		t.Errorf("unknown orders at lines %v, want [0 6] (before its purchase; after an invalid one)", got.UnknownOrders)
	}
}

// TestFoldSkuPageViewsBefore checks the enrichment: each valid purchase
// with the valid page views of its user before it in the ledger (another
// user's, a later one, an invalid one and a duplicate do not count).
func TestFoldSkuPageViewsBefore(t *testing.T) {
	folder := shopfold.NewDistinctFolder()
	for _, l := range lines(`
		{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T00:00:00Z","url":"/a"}
		{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T00:00:00Z","url":"/a"}
		{"id":"e-2","type":"page_view","user":"u1","time":"2026-11-01T00:00:01Z"}
		{"id":"e-3","type":"page_view","user":"u2","time":"2026-11-01T00:00:02Z","url":"/b"}
		{"id":"e-4","type":"purchase","user":"u1","time":"2026-11-01T00:00:03Z","order":"o-1","sku":"a","qty":1,"price_cents":10}
		{"id":"e-5","type":"page_view","user":"u1","time":"2026-10-01T00:00:00Z","url":"/c"}
		{"id":"e-6","type":"purchase","user":"u1","time":"2026-11-01T00:00:05Z","order":"o-2","sku":"a","qty":1,"price_cents":10}
		{"id":"e-7","type":"purchase","user":"u3","time":"2026-11-01T00:00:06Z","order":"o-3","sku":"b","qty":1,"price_cents":10}
		{"id":"e-8","type":"purchase","user":"u2","time":"2026-11-01T00:00:07Z","order":"o-4","sku":"b","qty":-1,"price_cents":10}
	`) {
		_ = folder.Add(l)
	}
	got := folder.Result().SkuPageViewsBefore
	want := map[string]shopfold.SkuPageViewsBeforeRow{"a": {Purchases: 2, PageViewsBefore: 1 + 2}, "b": {Purchases: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sku_page_views_before %+v, want %+v", got, want)
	}
	var before []int64
	for _, p := range folder.Purchases() {
		before = append(before, p.PageViewsBefore)
	}
	if !reflect.DeepEqual(before, []int64{1, 2, 0}) {
		t.Errorf("the purchases' page views before %v, want [1 2 0]", before)
	}
}
