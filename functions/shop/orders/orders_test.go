package orders_test

import (
	"testing"
	"time"

	"github.com/foldline/foldline/functions/shop/orders"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

const (
	purchase = `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`
	refund   = `{"id":"e-4","type":"refund","user":"u42","time":"2026-11-01T11:00:00Z","order":"o-1","amount_cents":1999}`
)

var at = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func TestOrders(t *testing.T) {
	tests := []struct {
		name  string
		event string
		want  []transform.Output
	}{
		{name: "purchase re-keyed by order", event: purchase, want: []transform.Output{transform.EmitBytes("o-1", []byte(purchase)).At(at)}},
		{name: "refund re-keyed by order", event: refund, want: []transform.Output{transform.EmitBytes("o-1", []byte(refund)).At(at.Add(time.Hour))}},
		{name: "page view dropped", event: `{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`},
		{name: "add to cart dropped", event: `{"id":"e-2","type":"add_to_cart","user":"u42","time":"2026-11-01T10:00:00Z","sku":"sku-7","qty":2}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			transformtest.Expect(t, orders.Transformation, transform.Message{Key: "u42", EventTime: at, Payload: []byte(tc.event)}, tc.want...)
		})
	}
}

func TestContract(t *testing.T) {
	transformtest.Run(t, orders.Transformation, transform.Message{Key: "u42", EventTime: at, Payload: []byte(purchase)},
		transform.Message{Key: "u42", EventTime: at, Payload: []byte(refund)})
}
