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
