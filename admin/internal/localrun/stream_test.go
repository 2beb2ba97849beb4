package localrun

import (
	"reflect"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
)

// TestCausesFindsEveryEvent looks up the events of two interleaved ledger
// topics in their order (with gaps longer than the cursor looks ahead), out
// of order, and one that is not among them.
func TestCausesFindsEveryEvent(t *testing.T) {
	var events []Message
	for i := range 200 {
		topic := "persistent://t/ledger/a"
		if i%3 == 0 {
			topic = "persistent://t/ledger/b"
		}
		events = append(events, Message{Topic: topic, Ledger: 5, Entry: int64(i / 10), Batch: int64(i % 10), Key: string(rune('a' + i%26))})
	}
	originOf := func(e Message) envelope.Origin {
		return envelope.Origin{Topic: e.Topic, Position: envelope.Position{Ledger: e.Ledger, Entry: e.Entry, Batch: int32(e.Batch), Path: "/0/1"}}
	}
	c := causes{events: events}
	var order []int
	for i := 0; i < len(events); i += 1 + i%(2*causesLookahead) { // gaps of up to twice the lookahead
		order = append(order, i, i) // two operations of one event
	}
	order = append(order, 150, 3, 199, 0)
	for _, i := range order {
		if got := c.of(originOf(events[i])); !reflect.DeepEqual(got, events[i]) {
			t.Fatalf("event %d: got %+v, want %+v", i, got, events[i])
		}
	}
	missing := originOf(events[7])
	missing.Position.Ledger = 6
	if got := c.of(missing); !reflect.DeepEqual(got, Message{}) {
		t.Errorf("an origin among no events: got %+v, want the zero Message", got)
	}
}
