package shopfold

import (
	"testing"
	"time"
)

func TestWindowsMoveByTheHour(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 30, 0, 0, time.UTC)
	cases := []struct {
		name  string
		event time.Time
		in7d  bool
		in1d  bool
	}{
		{name: "at's own hour", event: at.Add(-29 * time.Minute), in7d: true, in1d: true},
		{name: "after at in its hour", event: at.Add(29 * time.Minute), in7d: true, in1d: true},
		{name: "the next hour", event: at.Add(30 * time.Minute), in7d: false, in1d: false},
		{name: "the first hour of the 1-day window", event: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC), in7d: true, in1d: true},
		{name: "the hour before it", event: time.Date(2026, 12, 5, 9, 59, 59, 0, time.UTC), in7d: true, in1d: false},
		{name: "the first hour of the 7-day window", event: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), in7d: true},
		{name: "the hour before it", event: time.Date(2026, 11, 29, 9, 59, 59, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := []Purchase{{User: "u", SKU: "s", Qty: 2, PriceCents: 5, Time: tc.event}}
			up, units := UserPurchasesAt(ps, at)["u"], SKUUnitsAt(ps, at)["s"]
			if (up.Purchases7d == 1) != tc.in7d || (up.Purchases1d == 1) != tc.in1d || (units.Units1d == 2) != tc.in1d {
				t.Errorf("rows %+v, %+v: want in the 7-day window %v, in the 1-day window %v", up, units, tc.in7d, tc.in1d)
			}
		})
	}
}

func TestFolderKeepsThePurchases(t *testing.T) {
	f := NewFolder()
	for _, line := range []string{
		`{"id":"e-1","type":"purchase","user":"u1","time":"2026-12-06T10:00:00Z","order":"o-1","sku":"s","qty":2,"price_cents":5}`,
		`{"id":"e-2","type":"purchase","user":"u1","time":"2026-12-06T10:00:00Z","order":"o-2","sku":"s","qty":-2,"price_cents":5}`,
		`{"id":"e-3","type":"page_view","user":"u1","time":"2026-12-06T10:00:00Z","url":"/"}`,
	} {
		_ = f.Add([]byte(line))
	}
	if ps := f.Purchases(); len(ps) != 1 || ps[0] != (Purchase{User: "u1", SKU: "s", Qty: 2, PriceCents: 5, Time: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}) {
		t.Errorf("Purchases() = %+v, want the one valid purchase", ps)
	}
}
