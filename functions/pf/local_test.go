package pf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf/localwire"
)

// In local mode the instance reads input frames and writes, per input, the
// outputs a deployed instance would send — origin positions, a position of
// its own for each of several outputs, dead letters with the reason — then
// the input's Done frame.
func TestRunLocal(t *testing.T) {
	conf, err := parseConf([]byte(detailsJSON(baseDetails + `,"sink":{"topic":"persistent://t/n/out"},"userConfig":"{\"deadLetterTopic\":\"persistent://t/n/dlq\"}"}`)))
	if err != nil {
		t.Fatal(err)
	}
	handler := func(_ context.Context, in []byte) ([]Record, error) {
		switch string(in) {
		case "two":
			return []Record{{Payload: []byte("a")}, {Payload: []byte("b"), Key: "other"}}, nil
		case "bad":
			return nil, errors.New("cannot read this")
		}
		return []Record{{Payload: bytes.ToUpper(in)}}, nil
	}
	h, err := adaptHandler(handler)
	if err != nil {
		t.Fatal(err)
	}
	var input bytes.Buffer
	w := localwire.NewWriter(&input)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{"one", "two", "bad"} {
		if err := w.Input(&localwire.Input{Seq: uint64(i + 1), Topic: "persistent://t/n/ledger", Ledger: 7, Entry: int64(i), Batch: -1,
			Key: "k", Payload: []byte(p), Properties: map[string]string{}, EventTime: at, PublishTime: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var output bytes.Buffer
	inst := newInstance(conf, h, io.Discard)
	if err := inst.runLocal(t.Context(), &input, &output); err != nil {
		t.Fatal(err)
	}
	outputs, done := readFrames(t, output.Bytes())
	var got []string
	for _, seq := range done {
		for _, o := range outputs[seq] {
			pos := o.Properties[envelope.PropOriginPosition]
			if o.Topic == "persistent://t/n/dlq" {
				got = append(got, "dlq "+string(o.Payload)+" "+pos+" "+o.Properties[envelope.PropDeadLetterReason])
				continue
			}
			got = append(got, o.Topic+" "+o.Key+" "+string(o.Payload)+" "+pos)
		}
		got = append(got, "done "+string(rune('0'+seq)))
	}
	want := []string{
		"persistent://t/n/out k ONE 7:0:-1", "done 1",
		"persistent://t/n/out k a 7:1:-1/0", "persistent://t/n/out other b 7:1:-1/1", "done 2",
		"dlq bad 7:2:-1 cannot read this", "done 3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("local outputs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A driver's import marker (PropImportStates) that names the instance's
// function goes to its handler, which takes it (ImportedStates,
// TakesImport) and sends nothing; one naming another function is passed on
// to the output topic, marker and all; an import the handler does not take
// ends the run.
func TestLocalImportMarker(t *testing.T) {
	conf, err := parseConf([]byte(detailsJSON(baseDetails + `,"sink":{"topic":"persistent://t/n/out"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	run := func(takes bool, markers ...string) ([]string, error) {
		var imported []string
		h, err := adaptHandler(func(ctx context.Context, in []byte) ([]Record, error) {
			if ImportedStates(ctx) {
				imported = append(imported, string(in))
				if takes {
					TakesImport(ctx)
				}
				return nil, nil
			}
			return []Record{{Payload: bytes.ToUpper(in)}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var input bytes.Buffer
		w := localwire.NewWriter(&input)
		for i, function := range markers {
			in := &localwire.Input{Seq: uint64(i + 1), Topic: "persistent://t/n/in", Ledger: -1, Entry: -1, Batch: -1,
				Payload: []byte("states of " + function), Properties: map[string]string{PropImportStates: function}}
			if function == "" { // an event
				in.Ledger, in.Entry, in.Payload, in.Properties = 7, int64(i), []byte("event"), map[string]string{}
			}
			if err := w.Input(in); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var output bytes.Buffer
		err = newInstance(conf, h, io.Discard).runLocal(t.Context(), &input, &output)
		outputs, done := readFrames(t, output.Bytes())
		got := imported
		for _, seq := range done {
			for _, o := range outputs[seq] {
				got = append(got, o.Topic+" "+string(o.Payload)+" "+o.Properties[PropImportStates])
			}
		}
		return got, err
	}
	got, err := run(true, "f", "other", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"states of f", "persistent://t/n/out states of other other", "persistent://t/n/out EVENT "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("outputs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := run(false, "f"); err == nil || !strings.Contains(err.Error(), "keeps no states") {
		t.Errorf("an import no handler takes: %v, want the run ended", err)
	}
}
