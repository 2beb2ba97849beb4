package productsales_test

import (
	"testing"
	"time"

	ps "github.com/foldline/foldline/functions/shop/productsales"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var at = time.Date(2026, 11, 1, 10, 0, 7, 0, time.UTC)

func TestSales(t *testing.T) {
	tests := []struct {
		name  string
		event string
		want  transform.Output
	}{
		{
			name:  "purchase adds units, revenue and an order",
			event: `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:07Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`,
			want:  transform.Row(ps.View, ps.ColSKU, "sku-7").Apply(transform.Add(ps.ColUnits, 2), transform.Add(ps.ColRevenueCents, 3998), transform.Add(ps.ColOrders, 1)).At(at),
		},
		{
			name:  "free purchase still counts as an order",
			event: `{"id":"e-5","type":"purchase","user":"u1","time":"2026-11-01T10:00:07Z","order":"o-2","sku":"sku-7","qty":3,"price_cents":0}`,
			want:  transform.Row(ps.View, ps.ColSKU, "sku-7").Apply(transform.Add(ps.ColUnits, 3), transform.Add(ps.ColRevenueCents, 0), transform.Add(ps.ColOrders, 1)).At(at),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			transformtest.Expect(t, ps.Transformation, transform.Message{Key: "sku-7", Payload: []byte(tc.event)}, tc.want)
		})
	}
}

func TestRejectsOtherEvents(t *testing.T) {
	_, err := ps.Transformation.Process(transform.Message{Key: "u42", Payload: []byte(`{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/"}`)})
	if want := `decoding event: type: want "purchase", got "page_view"`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestContract(t *testing.T) {
	transformtest.Run(t, ps.Transformation, transform.Message{Key: "sku-7", Payload: []byte(`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:07Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`)})
}
