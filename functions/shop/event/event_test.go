package event_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/shop/event"
)

func TestCanonicalJSONParsesBackEqual(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 120e6, time.UTC)
	tests := []struct {
		name string
		ev   event.Event
	}{
		{name: "page view", ev: event.Event{ID: "e-1", Type: event.PageView, User: "u42", Time: at, URL: "/p/sku-7"}},
		{name: "add to cart of nothing", ev: event.Event{ID: "e-2", Type: event.AddToCart, User: "u42", Time: at, SKU: "sku-7"}},
		{name: "purchase", ev: event.Event{ID: "e-3", Type: event.Purchase, User: "u42", Time: at, Order: "o-1", SKU: "sku-7", Qty: 2, PriceCents: 1999}},
		{name: "refund with quotes in the id", ev: event.Event{ID: `e-"4"`, Type: event.Refund, User: "u42", Time: at, Order: "o-1", AmountCents: 1999}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := event.Parse(b)
			if err != nil {
				t.Fatalf("parsing %s: %v", b, err)
			}
			if got != tc.ev {
				t.Errorf("%s parsed to %+v, want %+v", b, got, tc.ev)
			}
		})
	}
}

func TestMarshalUnknownType(t *testing.T) {
	_, err := json.Marshal(event.Event{ID: "e", Type: "teleport"})
	if !errors.Is(err, event.ErrInvalid) {
		t.Errorf("got %v, want an ErrInvalid", err)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts survives a
// round trip through the canonical form.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`))
	f.Add([]byte(`{"id":"e-1","type":"page_view","user":"u","time":"2026-11-01T10:00:00.5+01:00","url":"/"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := event.Parse(b)
		if err != nil {
			if !errors.Is(err, event.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			return
		}
		canon, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("encoding accepted event %+v: %v", ev, err)
		}
		again, err := event.Parse(canon)
		if err != nil || again != ev {
			t.Errorf("round trip of %s: %+v, %v", canon, again, err)
		}
	})
}

// An outsized event or field is refused with the field named, before it is
// carried (and grown by re-encoding) through the pipeline.
func TestParseRefusesOutsizedEvents(t *testing.T) {
	page := func(id, url string) string {
		return `{"id":"` + id + `","type":"page_view","user":"u1","time":"2026-11-01T10:00:00Z","url":"` + url + `"}`
	}
	tests := []struct {
		name    string
		payload string
		field   string
	}{
		{name: "whole event", payload: page("e", "/") + strings.Repeat(" ", event.MaxEventBytes), field: ""},
		{name: "id", payload: page(strings.Repeat("x", event.MaxTextBytes+1), "/"), field: "id"},
		{name: "id of escapes", payload: page(strings.Repeat(`\u0041`, event.MaxTextBytes+1), "/"), field: "id"},
		{name: "url", payload: page("e", strings.Repeat("/", event.MaxURLBytes+1)), field: "url"},
		{name: "url of escapes", payload: page("e", strings.Repeat(`\"`, event.MaxURLBytes+1)), field: "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := event.Parse([]byte(tt.payload))
			var fe *event.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("Parse: %v, want a FieldError for field %q", err, tt.field)
			}
		})
	}
	// At the limits an event is fine.
	if _, err := event.Parse([]byte(page(strings.Repeat("x", event.MaxTextBytes), strings.Repeat("/", event.MaxURLBytes)))); err != nil {
		t.Errorf("an event at the limits: %v", err)
	}
}
