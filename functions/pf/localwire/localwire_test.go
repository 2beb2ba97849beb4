package localwire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
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

// TestEncodedPassesOn reads Output frames with their fields left encoded,
// passes them on as Input frames and reads those back: each input has the
// output's key, payload, properties and event time, and ParseFields,
// Property and DecodeOutput read the same fields in place.
func TestEncodedPassesOn(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 5, time.UTC)
	outputs := []*Output{
		{Seq: 1, Topic: "persistent://t/p/valid", Key: "u1", Payload: []byte(`{"a":1}`),
			Properties: map[string]string{"foldline.origin.topic": "persistent://t/ledger/events", "foldline.origin.pos": "7:1:0@e1"}, EventTime: at},
		{Seq: 2, Topic: "persistent://t/p/valid", Payload: []byte{}, Properties: map[string]string{}},
	}
	var frames bytes.Buffer
	w := NewWriter(&frames)
	for _, o := range outputs {
		if err := w.Output(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&frames)
	var passed bytes.Buffer
	pw := NewWriter(&passed)
	for i, want := range outputs {
		if kind, err := r.Next(); err != nil || kind != KindOutput {
			t.Fatalf("output %d: kind %q, %v", i, kind, err)
		}
		seq, topic, encoded, err := r.OutputEncoded()
		if err != nil || seq != want.Seq || topic != want.Topic {
			t.Fatalf("output %d: %d %q, %v; want %d %q", i, seq, topic, err, want.Seq, want.Topic)
		}
		got, err := DecodeOutput(seq, topic, encoded)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("output %d decoded: %+v, %v; want %+v", i, got, err, want)
		}
		f, err := ParseFields(encoded)
		if err != nil || string(f.Key) != want.Key || string(f.Payload) != string(want.Payload) || !f.EventTime.Equal(want.EventTime) {
			t.Fatalf("output %d fields: %q %q %v, %v", i, f.Key, f.Payload, f.EventTime, err)
		}
		for k, v := range want.Properties {
			if got, ok := f.Property(k); !ok || string(got) != v {
				t.Errorf("output %d property %s: %q, %v; want %q", i, k, got, ok, v)
			}
		}
		if _, ok := f.Property("absent"); ok {
			t.Errorf("output %d has a property it was not given", i)
		}
		if err := pw.Input(&Input{Seq: 10 + seq, Topic: topic, Ledger: -1, Entry: -1, Batch: -1, Encoded: encoded, PublishTime: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Flush(); err != nil {
		t.Fatal(err)
	}
	pr := NewReader(&passed)
	for i, o := range outputs {
		if kind, err := pr.Next(); err != nil || kind != KindInput {
			t.Fatalf("input %d: kind %q, %v", i, kind, err)
		}
		got, err := pr.Input()
		want := &Input{Seq: 10 + o.Seq, Topic: o.Topic, Ledger: -1, Entry: -1, Batch: -1, Key: o.Key, Payload: o.Payload,
			Properties: o.Properties, EventTime: o.EventTime, PublishTime: at}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("input %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
}

// TestOutputEncodedRefusesTruncatedFields cuts an Output frame's fields
// short at every byte: OutputEncoded reports a malformed frame instead of
// passing on fields the next function could not read.
func TestOutputEncodedRefusesTruncatedFields(t *testing.T) {
	var frame bytes.Buffer
	w := NewWriter(&frame)
	if err := w.Output(&Output{Seq: 3, Topic: "t", Key: "k", Payload: []byte("payload"), Properties: map[string]string{"p": "v"}, EventTime: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(frame.Bytes()))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	whole := slices.Clone(r.buf)
	const head = 3 // seq, topic length, topic
	for n := head; n < len(whole); n++ {
		r.buf, r.pos, r.err = whole[:n], 0, nil
		if _, _, _, err := r.OutputEncoded(); !errors.Is(err, ErrFrame) {
			t.Errorf("fields cut to %d of %d bytes: %v, want %v", n-head, len(whole)-head, err, ErrFrame)
		}
	}
}
