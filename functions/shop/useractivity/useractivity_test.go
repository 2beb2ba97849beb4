package useractivity_test

import (
	"testing"
	"time"

	ua "github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var (
	at  = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	row = transform.Row(ua.View, ua.ColUser, "u42")
)

var tests = []struct {
	name  string
	event string
	want  transform.Output
}{
	{
		name:  "page view counts, is seen, sets the url",
		event: `{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/p/sku-7"}`,
		want:  row.Apply(transform.Add(ua.ColPageViews, 1), transform.Max(ua.ColLastSeen, at), transform.Set(ua.ColLastURL, "/p/sku-7")).At(at),
	},
	{
		name:  "add to cart sums units",
		event: `{"id":"e-2","type":"add_to_cart","user":"u42","time":"2026-11-01T10:00:00Z","sku":"sku-7","qty":2}`,
		want:  row.Apply(transform.Add(ua.ColCartUnits, 2), transform.Max(ua.ColLastSeen, at)).At(at),
	},
	{
		name:  "purchase counts and spends qty times price",
		event: `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`,
		want:  row.Apply(transform.Add(ua.ColPurchases, 1), transform.Add(ua.ColSpentCents, 3998), transform.Max(ua.ColLastSeen, at)).At(at),
	},
	{
		name:  "refund takes the amount back",
		event: `{"id":"e-4","type":"refund","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","amount_cents":1999}`,
		want:  row.Apply(transform.Add(ua.ColSpentCents, -1999), transform.Max(ua.ColLastSeen, at)).At(at),
	},
}

func TestActivity(t *testing.T) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The op's time is the event's, whatever the message says.
			transformtest.Expect(t, ua.Transformation, transform.Message{Key: "u42", EventTime: at.Add(time.Hour), Payload: []byte(tc.event)}, tc.want)
		})
	}
}

func TestContract(t *testing.T) {
	var in []transform.Message
	for _, tc := range tests {
		in = append(in, transform.Message{Key: "u42", EventTime: at, Payload: []byte(tc.event)})
	}
	transformtest.Run(t, ua.Transformation, in...)
}
