package localrun

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/pf/localwire"
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

	// Events of one topic (a shared stage's outputs, read as a fused run's
	// input): found as before; an origin on another topic (the ledger
	// event they came of) is among none of them.
	var one []Message
	for _, e := range events {
		if e.Topic == "persistent://t/ledger/a" {
			one = append(one, e)
		}
	}
	c = newCauses(one)
	for _, i := range []int{0, 5, len(one) - 1, 2} {
		if got := c.of(originOf(one[i])); !reflect.DeepEqual(got, one[i]) {
			t.Fatalf("event %d of one topic: got %+v, want %+v", i, got, one[i])
		}
	}
	elsewhere := originOf(one[3])
	elsewhere.Topic = "persistent://t/ledger/b"
	c = newCauses(one)
	if got := c.of(elsewhere); !reflect.DeepEqual(got, Message{}) {
		t.Errorf("an origin on another topic: got %+v, want the zero Message", got)
	}
	if c.byKey != nil {
		t.Error("an origin on another topic than the events' searched them all")
	}
}

// TestOriginOfEncodedOutput reads the origin of a stage's output passed on
// encoded as envelope reads it from a map: the same origin, the topic
// string reused when it is the last one's, and the same error for a
// malformed position or no origin at all.
func TestOriginOfEncodedOutput(t *testing.T) {
	encode := func(props map[string]string) Message {
		t.Helper()
		return encodedOutput(t, "persistent://t/p/valid", []byte(`{}`), props)
	}
	for _, props := range []map[string]string{
		{envelope.PropOrigin: "7:3:1/0@e1 persistent://t/ledger/events", "other": "x"},
		{envelope.PropOrigin: "7:3 persistent://t/ledger/events"},
		{envelope.PropOrigin: "7:3:1"},
		{envelope.PropOrigin: "7:3:1 "},
		{envelope.PropOriginTopic: "persistent://t/ledger/events", envelope.PropOriginPosition: "7:3:1/0@e1", "other": "x"},
		{envelope.PropOriginTopic: "persistent://t/ledger/events", envelope.PropOriginPosition: "7:3"},
		{envelope.PropOriginPosition: "7:3:1"},
		{"other": "x"},
	} {
		want, wantErr := envelope.OriginFromProperties(props)
		got, err := originOf(encode(props))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%v: got %+v, %v; want %+v, %v", props, got, err, want, wantErr)
		}
	}
	last := "persistent://t/ledger/events"
	m := encode(map[string]string{envelope.PropOrigin: "7:3:1 " + last})
	payload, got, _, err := sinkInput(m, last)
	if err != nil || string(payload) != `{}` || got.Topic != last || got.Position.Entry != 3 {
		t.Fatalf("sinkInput: %q %+v, %v", payload, got, err)
	}
	reused := testing.AllocsPerRun(100, func() { _, _, _, _ = sinkInput(m, last) })
	fresh := testing.AllocsPerRun(100, func() { _, _, _, _ = sinkInput(m, "") })
	if reused >= fresh {
		t.Errorf("the last origin topic given: %.0f allocations, as many as without it (%.0f)", reused, fresh)
	}
}

// sinkInput tells a marker of the driver's from a view operation, in
// either form, and reads an operation's origin as envelope reads it from
// its properties.
func TestSinkInputTellsMarkersFromOperations(t *testing.T) {
	encode := func(props map[string]string) Message {
		t.Helper()
		return encodedOutput(t, "persistent://t/p/ops", []byte(`{"op":1}`), props)
	}
	op := map[string]string{envelope.PropOrigin: "7:3:1 persistent://t/ledger/events"}
	for _, props := range []map[string]string{{pf.PropExportStates: "true"}, {pf.PropImportStates: "dedup"}} {
		for _, m := range []Message{encode(props), {Topic: "persistent://t/p/ops", Properties: props}} {
			if _, _, marker, err := sinkInput(m, ""); !marker || err != nil {
				t.Errorf("%v (encoded: %t): marker %t, %v; want a marker", props, m.Encoded != nil, marker, err)
			}
		}
	}
	for _, m := range []Message{encode(op), {Topic: "persistent://t/p/ops", Payload: []byte(`{"op":1}`), Properties: op}} {
		payload, origin, marker, err := sinkInput(m, "")
		wantPayload := []byte(`{"op":1}`)
		wantOrigin, wantErr := envelope.OriginFromProperties(op)
		if marker || err != nil || wantErr != nil || !bytes.Equal(payload, wantPayload) || !reflect.DeepEqual(origin, wantOrigin) {
			t.Errorf("encoded %t: %q %+v marker %t %v; want %q %+v, %v", m.Encoded != nil, payload, origin, marker, err, wantPayload, wantOrigin, wantErr)
		}
	}
	if _, _, _, err := sinkInput(encode(map[string]string{"other": "x"}), ""); err == nil {
		t.Error("an operation without an origin: no error")
	}
}

// encodedOutput is a stage's output to topic, with payload and props, as
// the driver receives it (fields after the topic still encoded).
func encodedOutput(t *testing.T, topic string, payload []byte, props map[string]string) Message {
	t.Helper()
	var buf bytes.Buffer
	w := localwire.NewWriter(&buf)
	if err := w.Output(&localwire.Output{Seq: 1, Topic: topic, Payload: payload, Properties: props}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := localwire.NewReader(&buf)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, got, encoded, err := r.OutputEncoded()
	if err != nil {
		t.Fatal(err)
	}
	return Message{Topic: got, Ledger: -1, Entry: -1, Batch: -1, Encoded: bytes.Clone(encoded)}
}

// A ledger event cannot pose as a marker of the driver's: FromPulsar's
// properties lose those of pf.PropLocalPrefix, and keep the rest.
func TestWithoutLocalProperties(t *testing.T) {
	props := map[string]string{"app": "x", pf.PropImportStates: "dedup", pf.PropExportStates: "true"}
	got := withoutLocal(props)
	if !reflect.DeepEqual(got, map[string]string{"app": "x"}) {
		t.Fatalf("withoutLocal: %v", got)
	}
	if len(props) != 3 {
		t.Fatal("withoutLocal changed the event's own map")
	}
	plain := map[string]string{"app": "x"}
	if got := withoutLocal(plain); !reflect.DeepEqual(got, plain) {
		t.Fatalf("withoutLocal of plain properties: %v", got)
	}
}
