package validate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var examples = []string{
	`{"id":"e-1","type":"page_view","user":"u42","time":"2026-11-01T10:00:00Z","url":"/p/sku-7"}`,
	`{"id":"e-2","type":"add_to_cart","user":"u42","time":"2026-11-01T10:00:05.25Z","sku":"sku-7","qty":2}`,
	`{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T12:00:07+02:00","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`,
	`{"id":"e-4","type":"refund","user":"u42","time":"2026-11-01T11:00:00.123456789Z","order":"o-1","amount_cents":1999}`,
}

func messages(lines ...string) []transform.Message {
	out := make([]transform.Message, len(lines))
	for i, l := range lines {
		out[i] = transform.Message{Key: "u42", Payload: []byte(l)}
	}
	return out
}

func TestContract(t *testing.T) {
	transformtest.Run(t, validate.Transformation, messages(examples...)...)
}

func TestValidEventsPassInCanonicalForm(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		at   time.Time
	}{
		{
			name: "page view",
			in:   examples[0],
			want: examples[0],
			at:   time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		},
		{
			name: "add to cart with fractional seconds",
			in:   examples[1],
			want: examples[1],
			at:   time.Date(2026, 11, 1, 10, 0, 5, 250e6, time.UTC),
		},
		{
			name: "purchase with an offset becomes UTC",
			in:   examples[2],
			want: `{"id":"e-3","type":"purchase","user":"u42","time":"2026-11-01T10:00:07Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":1999}`,
			at:   time.Date(2026, 11, 1, 10, 0, 7, 0, time.UTC),
		},
		{
			name: "refund with nanoseconds",
			in:   examples[3],
			want: examples[3],
			at:   time.Date(2026, 11, 1, 11, 0, 0, 123456789, time.UTC),
		},
		{
			name: "fields of other types and unknown fields are dropped",
			in:   `{"id":"e-5","type":"page_view","user":"u1","time":"2026-11-01T10:00:00Z","url":"/","qty":"x","campaign":{"a":1}}`,
			want: `{"id":"e-5","type":"page_view","user":"u1","time":"2026-11-01T10:00:00Z","url":"/"}`,
			at:   time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		},
		{
			name: "zero quantity and price",
			in:   `{"id":"e-6","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":0,"price_cents":0}`,
			want: `{"id":"e-6","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":0,"price_cents":0}`,
			at:   time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The ledger message's key is not trusted: the output is keyed by the event's user.
			recs, err := validate.Transformation.Process(transform.Message{Key: "whatever", Payload: []byte(tc.in)})
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			if len(recs) != 1 {
				t.Fatalf("got %d records, want 1", len(recs))
			}
			r := recs[0]
			if string(r.Payload) != tc.want || !r.EventTime.Equal(tc.at) {
				t.Errorf("got %s at %v\nwant %s at %v", r.Payload, r.EventTime, tc.want, tc.at)
			}
			ev, err := event.Parse(r.Payload)
			if err != nil || r.Key != ev.User {
				t.Errorf("output key %q, user %q, reparse error %v", r.Key, ev.User, err)
			}
		})
	}
}

func TestRejectsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "bad JSON", in: `{"id":"e-1","type":"page_view"`, want: "decoding event: not a JSON object: unexpected end of JSON input"},
		{name: "not an object", in: `["page_view"]`, want: "decoding event: not a JSON object: json: cannot unmarshal array into Go value of type event.object"},
		{name: "null", in: `null`, want: "decoding event: not a JSON object: null"},
		{name: "unknown type", in: `{"id":"e","type":"foo","user":"u","time":"2026-11-01T10:00:00Z"}`, want: `decoding event: type: unknown "foo"`},
		{name: "missing id", in: `{"type":"page_view","user":"u","time":"2026-11-01T10:00:00Z","url":"/"}`, want: "decoding event: id: missing"},
		{name: "missing type", in: `{"id":"e","user":"u","time":"2026-11-01T10:00:00Z"}`, want: "decoding event: type: missing"},
		{name: "missing user", in: `{"id":"e","type":"page_view","time":"2026-11-01T10:00:00Z","url":"/"}`, want: "decoding event: user: missing"},
		{name: "empty user", in: `{"id":"e","type":"page_view","user":"","time":"2026-11-01T10:00:00Z","url":"/"}`, want: "decoding event: user: missing"},
		{name: "null user", in: `{"id":"e","type":"page_view","user":null,"time":"2026-11-01T10:00:00Z","url":"/"}`, want: "decoding event: user: missing"},
		{name: "user a number", in: `{"id":"e","type":"page_view","user":42,"time":"2026-11-01T10:00:00Z","url":"/"}`, want: "decoding event: user: must be a string"},
		{name: "time not RFC 3339", in: `{"id":"e","type":"page_view","user":"u","time":"2026-11-01 10:00:00","url":"/"}`, want: "decoding event: time: not RFC 3339"},
		{name: "time a number", in: `{"id":"e","type":"page_view","user":"u","time":1700000000,"url":"/"}`, want: "decoding event: time: must be a string"},
		{name: "page view without url", in: `{"id":"e","type":"page_view","user":"u","time":"2026-11-01T10:00:00Z"}`, want: "decoding event: url: missing"},
		{name: "cart without sku", in: `{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","qty":1}`, want: "decoding event: sku: missing"},
		{name: "negative qty", in: `{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":-1}`, want: "decoding event: qty: must be >= 0"},
		{name: "qty a string", in: `{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":"2"}`, want: "decoding event: qty: must be a number"},
		{name: "fractional qty", in: `{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":1.5}`, want: "decoding event: qty: must be a whole number"},
		{name: "huge qty", in: `{"id":"e","type":"add_to_cart","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":99999999999999999999}`, want: "decoding event: qty: must be <= 1000000"},
		{name: "purchase without order", in: `{"id":"e","type":"purchase","user":"u","time":"2026-11-01T10:00:00Z","sku":"s","qty":1,"price_cents":5}`, want: "decoding event: order: missing"},
		{name: "negative price", in: `{"id":"e","type":"purchase","user":"u","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":1,"price_cents":-5}`, want: "decoding event: price_cents: must be >= 0"},
		{name: "price a bool", in: `{"id":"e","type":"purchase","user":"u","time":"2026-11-01T10:00:00Z","order":"o","sku":"s","qty":1,"price_cents":true}`, want: "decoding event: price_cents: must be a number"},
		{name: "refund without amount", in: `{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o"}`, want: "decoding event: amount_cents: missing"},
		{name: "negative refund", in: `{"id":"e","type":"refund","user":"u","time":"2026-11-01T10:00:00Z","order":"o","amount_cents":-1}`, want: "decoding event: amount_cents: must be >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := validate.Transformation.Process(transform.Message{Key: "u", Payload: []byte(tc.in)})
			if err == nil {
				t.Fatalf("accepted, emitting %v", recs)
			}
			if err.Error() != tc.want {
				t.Errorf("reason %q, want %q", err, tc.want)
			}
			if !errors.Is(err, event.ErrInvalid) || !errors.Is(err, transform.ErrMalformed) {
				t.Errorf("error %v does not match event.ErrInvalid and transform.ErrMalformed", err)
			}
		})
	}
}
