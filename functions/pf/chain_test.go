package pf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf/localwire"
)

// chainTestConfs are the instance configs of a chain of two functions,
// a (ledger → mid, in the pair origin form) and b (mid → out, single).
func chainTestConfs() []string {
	a := detailsJSON(`{"tenant":"t","namespace":"n","name":"a","source":{"inputSpecs":{"persistent://t/n/ledger":{}}},"sink":{"topic":"persistent://t/n/mid"},` +
		`"userConfig":"{\"deadLetterTopic\":\"persistent://t/n/dlq-a\",\"originProperty\":\"pair\"}"}`)
	b := detailsJSON(`{"tenant":"t","namespace":"n","name":"b","source":{"inputSpecs":{"persistent://t/n/mid":{}}},"sink":{"topic":"persistent://t/n/out"},` +
		`"userConfig":"{\"deadLetterTopic\":\"persistent://t/n/dlq-b\",\"originProperty\":\"single\"}"}`)
	return []string{a, b}
}

// chainTestHandlers are a and b: a upper-cases, fans "two" out, fails
// "bad" and sends "side" to a topic of its own; b appends "!", reads its
// input's properties and event time into the payload, and fails "B".
func chainTestHandlers() []any {
	a := func(_ context.Context, in []byte) ([]Record, error) {
		switch string(in) {
		case "two":
			return []Record{{Payload: []byte("A")}, {Payload: []byte("B"), Key: "other"}, {Payload: []byte("C"), Properties: map[string]string{"x": "y"}}}, nil
		case "bad":
			return nil, errors.New("cannot read this")
		case "side":
			return []Record{{Topic: "persistent://t/n/side", Payload: in}}, nil
		}
		return []Record{{Payload: bytes.ToUpper(in), EventTime: time.Date(2026, 12, 5, 1, 2, 3, 4, time.FixedZone("x", 3600))}}, nil
	}
	b := func(ctx context.Context, in []byte) ([]Record, error) {
		if string(in) == "B" {
			return nil, Permanent(errors.New("b refuses B"))
		}
		fc, _ := FromContext(ctx)
		msg := fc.GetCurrentRecord()
		return []Record{{Payload: fmt.Appendf(nil, "%s! %d props, at %s, key %s", in, len(msg.Properties()), msg.EventTime(), msg.Key())}}, nil
	}
	return []any{a, b}
}

// chainTestInputs are the ledger events the chain tests feed.
func chainTestInputs(t *testing.T) []byte {
	var input bytes.Buffer
	w := localwire.NewWriter(&input)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{"one", "two", "bad", "side", "last"} {
		if err := w.Input(&localwire.Input{Seq: uint64(i + 1), Topic: "persistent://t/n/ledger", Ledger: 7, Entry: int64(i), Batch: -1,
			Key: "k", Payload: []byte(p), Properties: map[string]string{envelope.PropLedgerEpoch: "e1", "app": "v"}, EventTime: at, PublishTime: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return input.Bytes()
}

// readFrames reads out's frames: the outputs of each input seq, in order,
// and the order of the Done frames.
func readFrames(t *testing.T, out []byte) (map[uint64][]*localwire.Output, []uint64) {
	t.Helper()
	r := localwire.NewReader(bytes.NewReader(out))
	outputs := map[uint64][]*localwire.Output{}
	var done []uint64
	for {
		kind, err := r.Next()
		if errors.Is(err, io.EOF) {
			return outputs, done
		}
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case localwire.KindOutput:
			o, err := r.Output()
			if err != nil {
				t.Fatal(err)
			}
			outputs[o.Seq] = append(outputs[o.Seq], o)
		case localwire.KindDone:
			seq, err := r.Done()
			if err != nil {
				t.Fatal(err)
			}
			done = append(done, seq)
		}
	}
}

// runSeparately runs the chain's functions as separate local instances,
// handing a's outputs to its output topic on to b as a driver of
// separate processes (package localrun) does, and returns the frames
// the chain would write: per ledger input, a's other outputs, then b's.
func runSeparately(t *testing.T, confs []string, handlers []any, input []byte) map[uint64][]*localwire.Output {
	t.Helper()
	runOne := func(i int, in []byte) map[uint64][]*localwire.Output {
		conf, err := parseConf([]byte(confs[i]))
		if err != nil {
			t.Fatal(err)
		}
		h, err := adaptHandler(handlers[i])
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := newInstance(conf, h, io.Discard).runLocal(t.Context(), bytes.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		outputs, _ := readFrames(t, out.Bytes())
		return outputs
	}
	first := runOne(0, input)
	want := map[uint64][]*localwire.Output{}
	var mid bytes.Buffer
	w := localwire.NewWriter(&mid)
	var seq uint64
	ledgerSeq := map[uint64]uint64{} // b's input seq → the ledger input's
	for s := uint64(1); s <= uint64(len(first)+10); s++ {
		for _, o := range first[s] {
			if o.Topic != "persistent://t/n/mid" {
				want[s] = append(want[s], o)
				continue
			}
			seq++
			ledgerSeq[seq] = s
			if err := w.Input(&localwire.Input{Seq: seq, Topic: o.Topic, Ledger: -1, Entry: -1, Batch: -1,
				Key: o.Key, Payload: o.Payload, Properties: o.Properties, EventTime: o.EventTime}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	second := runOne(1, mid.Bytes())
	for s := uint64(1); s <= seq; s++ {
		for _, o := range second[s] {
			o.Seq = ledgerSeq[s]
			want[o.Seq] = append(want[o.Seq], o)
		}
	}
	return want
}

// A chain in one process writes, for every input, exactly the frames that
// its functions run as separate local instances give: every output and
// dead letter, property for property, in the same order, then the
// input's Done frame.
func TestRunChainMatchesSeparateInstances(t *testing.T) {
	confs, handlers, input := chainTestConfs(), chainTestHandlers(), chainTestInputs(t)
	want := runSeparately(t, confs, handlers, input)

	var out bytes.Buffer
	args := []string{LocalFlag, "-instance-conf", confs[0], "-instance-conf", confs[1]}
	if err := runChain(t.Context(), handlers, args, bytes.NewReader(input), &out); err != nil {
		t.Fatal(err)
	}
	got, done := readFrames(t, out.Bytes())
	if !reflect.DeepEqual(done, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("done frames %v, want 1..5 in order", done)
	}
	if len(want) != 5 {
		t.Fatalf("the separate instances answered %d inputs, want 5: %v", len(want), want)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if !reflect.DeepEqual(got[seq], want[seq]) {
			t.Errorf("input %d: the chain wrote\n%s\nseparate instances\n%s", seq, describe(got[seq]), describe(want[seq]))
		}
	}
	// What the case covers: a's dead letter, a's side output, b's dead
	// letter of one of a's three outputs, b's outputs.
	topics := map[string]int{}
	for _, outs := range got {
		for _, o := range outs {
			topics[o.Topic]++
		}
	}
	if w := map[string]int{"persistent://t/n/dlq-a": 1, "persistent://t/n/side": 1, "persistent://t/n/dlq-b": 1, "persistent://t/n/out": 4}; !reflect.DeepEqual(topics, w) {
		t.Errorf("outputs by topic %v, want %v", topics, w)
	}
}

func describe(outs []*localwire.Output) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "  %s key %q %q %v at %s\n", o.Topic, o.Key, o.Payload, o.Properties, o.EventTime)
	}
	return b.String()
}

// A chain's command line names one config per function after -local; a
// handler that defers its input stops the chain with the reason.
func TestRunChainRefuses(t *testing.T) {
	confs, handlers := chainTestConfs(), chainTestHandlers()
	for _, args := range [][]string{
		{"-instance-conf", confs[0], "-instance-conf", confs[1]},
		{LocalFlag, "-instance-conf", confs[0]},
		{LocalFlag, "-instance-conf", confs[0], "-instance-conf-path", "x"},
	} {
		if err := runChain(t.Context(), handlers, args, strings.NewReader(""), io.Discard); !errors.Is(err, ErrBadConfig) {
			t.Errorf("args %q: %v, want ErrBadConfig", args, err)
		}
	}
	deferring := func(ctx context.Context, in []byte) ([]Record, error) {
		fc, _ := FromContext(ctx)
		_ = fc.Defer() // and never completed
		return []Record{{Payload: in}}, nil
	}
	// The driver keeps its end open, waiting for outputs: the chain ends
	// all the same.
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(chainTestInputs(t))
	args := []string{LocalFlag, "-instance-conf", confs[0], "-instance-conf", confs[1]}
	err := runChain(t.Context(), []any{deferring, handlers[1]}, args, pr, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot run in a chain") {
		t.Errorf("a deferring handler: %v, want it refused", err)
	}
}
