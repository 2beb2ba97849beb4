package localwire

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestFramesRoundTrip writes inputs, outputs and Done frames and reads
// them back field for field, with more distinct property names than the
// reader keeps and an empty payload.
func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	at := time.Date(2026, 12, 2, 4, 0, 0, 123, time.UTC)
	var inputs []*Input
	var outputs []*Output
	for i := range maxNames + 10 {
		in := &Input{Seq: uint64(i + 1), Topic: "persistent://t/ledger/events", Ledger: 7, Entry: int64(i), Batch: -1,
			Key: fmt.Sprint("u", i), Payload: []byte(fmt.Sprint("event ", i)),
			Properties: map[string]string{"fl-origin": "x", fmt.Sprint("p", i): fmt.Sprint(i)}, EventTime: at, PublishTime: at.Add(time.Second)}
		out := &Output{Seq: uint64(i + 1), Topic: fmt.Sprint("persistent://t/p/out-", i%3), Key: in.Key, Payload: []byte{},
			Properties: map[string]string{}, EventTime: time.Time{}}
		if err := w.Input(in); err != nil {
			t.Fatal(err)
		}
		if err := w.Output(out); err != nil {
			t.Fatal(err)
		}
		if err := w.Done(out.Seq); err != nil {
			t.Fatal(err)
		}
		inputs, outputs = append(inputs, in), append(outputs, out)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf)
	for i := range inputs {
		for _, want := range []byte{KindInput, KindOutput, KindDone} {
			kind, err := r.Next()
			if err != nil || kind != want {
				t.Fatalf("frame %d: kind %q, %v; want %q", i, kind, err, want)
			}
			switch kind {
			case KindInput:
				got, err := r.Input()
				if err != nil || !reflect.DeepEqual(got, inputs[i]) {
					t.Fatalf("input %d: %+v, %v; want %+v", i, got, err, inputs[i])
				}
			case KindOutput:
				got, err := r.Output()
				if err != nil || !reflect.DeepEqual(got, outputs[i]) {
					t.Fatalf("output %d: %+v, %v; want %+v", i, got, err, outputs[i])
				}
			case KindDone:
				if seq, err := r.Done(); err != nil || seq != uint64(i+1) {
					t.Fatalf("done %d: %d, %v", i, seq, err)
				}
			}
		}
	}
	if len(r.names) > maxNames {
		t.Errorf("the reader keeps %d names, more than %d", len(r.names), maxNames)
	}
}
