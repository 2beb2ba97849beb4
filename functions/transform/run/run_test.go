package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/run"
)

type event struct {
	SKU string `json:"sku"`
}

var bySKU = transform.New(transform.JSON[event], func(in transform.Input[event]) ([]transform.Output, error) {
	if in.Event.SKU == "" {
		return nil, errors.New("sku: missing")
	}
	return []transform.Output{
		transform.Emit(in.Event.SKU, in.Event),
		transform.Row("sales", "sku", in.Event.SKU).Apply(transform.Add("orders", 1)),
	}, nil
})

func TestProcessLeavesTheInputsOriginToTheRuntime(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	origin := envelope.Origin{Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 3, Entry: 9}}
	recs, err := run.Process(bySKU, transform.Message{Key: "u1", EventTime: at, Payload: []byte(`{"sku":"s1"}`), Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2", len(recs))
	}
	for i, r := range recs {
		// Each output's origin is origin.Child(i, 2), which the runtime
		// sets (package pf tests it): no properties of the record's own.
		if r.Properties != nil {
			t.Errorf("record %d: properties %v, want none", i, r.Properties)
		}
		if r.Key != "s1" || !r.EventTime.Equal(at) || r.Topic != "" {
			t.Errorf("record %d: key %q, time %v, topic %q", i, r.Key, r.EventTime, r.Topic)
		}
	}
}

// elsewhere is a processor whose one record has an origin of its own.
type elsewhere struct{ origin envelope.Origin }

func (p elsewhere) Process(m transform.Message) ([]transform.Record, error) {
	return []transform.Record{{Key: m.Key, Payload: m.Payload, Origin: p.origin}}, nil
}

func TestProcessSetsAnOriginOfTheRecordsOwn(t *testing.T) {
	input := envelope.Origin{Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 3, Entry: 9}}
	own := envelope.Origin{Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 4, Entry: 1, Path: "/2"}}
	recs, err := run.Process(elsewhere{own}, transform.Message{Key: "u1", Payload: []byte(`{}`), Origin: input})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	if got, err := envelope.OriginFromProperties(recs[0].Properties); err != nil || got != own {
		t.Errorf("origin %+v (%v), want %+v", got, err, own)
	}
}

func TestProcessErrorsArePermanent(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		reason  pf.DeadLetterReason
	}{
		{name: "malformed", payload: "{", reason: pf.ReasonMalformed},
		{name: "rejected by the function", payload: "{}", reason: pf.ReasonRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run.Process(bySKU, transform.Message{Key: "u1", Payload: []byte(tc.payload)})
			if !pf.IsPermanent(err) {
				t.Errorf("error %v is not permanent", err)
			}
			if got := pf.ReasonOf(err); got != tc.reason {
				t.Errorf("dead-letter reason of %v: %s, want %s", err, got, tc.reason)
			}
		})
	}
}

func TestHandlerOutsideTheRuntime(t *testing.T) {
	_, err := run.Handler(bySKU)(context.Background(), []byte(`{"sku":"s1"}`))
	if !errors.Is(err, run.ErrNoFunctionContext) {
		t.Errorf("got %v, want ErrNoFunctionContext", err)
	}
}

// TestEventTimeUnsetIsZero: the Pulsar client reports a message without an
// event time as the Unix epoch; a transformation sees the zero time that
// transform.Input documents.
func TestEventTimeUnsetIsZero(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for in, want := range map[time.Time]time.Time{
		time.Unix(0, 0):         {},
		{}:                      {},
		at:                      at,
		time.UnixMilli(1).UTC(): time.UnixMilli(1).UTC(),
	} {
		if got := run.EventTime(in); !got.Equal(want) || got.IsZero() != want.IsZero() {
			t.Errorf("EventTime(%v) = %v, want %v", in, got, want)
		}
	}
}
