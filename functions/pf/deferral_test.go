package pf

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestDeferredOutcomes(t *testing.T) {
	completes := map[string]func(error){}
	handler := func(ctx context.Context, in []byte) ([]Record, error) {
		fc, _ := FromContext(ctx)
		completes[string(in)] = fc.Defer()
		return []Record{{Payload: append([]byte("out-"), in...)}}, nil
	}
	inst, out := newTestInstance(t, testConf(), handler)
	acks := &fakeAcker{}
	for i, p := range []string{"ok", "bad", "later", "early"} {
		if p == "early" {
			// An outcome reported before the handler returns still counts.
			inst.handler = func(ctx context.Context, _ []byte, _ []Record) ([]Record, error) {
				fc, _ := FromContext(ctx)
				fc.Defer()(nil)
				return nil, nil
			}
		}
		if err := inst.process(t.Context(), ledgerEvent(p, int64(i)), acks); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(acks.acked, []string{"early"}) || len(out.sent) != 0 {
		t.Fatalf("before the outcomes: acked %v, sent %d; want only the early one acked, nothing sent", acks.acked, len(out.sent))
	}

	completes["bad"](Permanent(errors.New("column x: unknown")))
	completes["ok"](nil)
	completes["ok"](errors.New("a second outcome is ignored"))
	completes["later"](errors.New("cassandra is down"))

	if want := []string{"early", "bad", "ok"}; !slices.Equal(acks.acked, want) {
		t.Errorf("acked %v, want %v", acks.acked, want)
	}
	// A failed outcome ends the session rather than letting later inputs
	// overtake this one (see session).
	if len(acks.nacked) != 0 || !errors.Is(inst.sess.err(), errSendFailed) {
		t.Errorf("nacked %v, session ended with %v; want nothing nacked and the session ended", acks.nacked, inst.sess.err())
	}
	if len(out.sent) != 2 || out.sent[0].topic != dlqTopic || out.sent[1].topic != outTopic || string(out.sent[1].msg.Payload) != "out-ok" {
		t.Fatalf("sent %+v, want the dead letter of bad, then ok's output", out.sent)
	}
	if reason := out.sent[0].msg.Properties["foldline.dlq.reason"]; reason != "column x: unknown" {
		t.Errorf("dead-letter reason %q", reason)
	}
	if got := inst.stats.processed.total.Load(); got != 2 {
		t.Errorf("processed = %v, want 2 (ok and early)", got)
	}
}

func TestDeferThenErrorIsVoid(t *testing.T) {
	var complete func(error)
	handler := func(ctx context.Context, in []byte) error {
		fc, _ := FromContext(ctx)
		complete = fc.Defer()
		return Permanent(errors.New("not an operation"))
	}
	inst, out := newTestInstance(t, testConf(), handler)
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); err != nil {
		t.Fatal(err)
	}
	complete(nil)
	if len(out.sent) != 1 || out.sent[0].topic != dlqTopic {
		t.Fatalf("sent %+v, want only the dead letter", out.sent)
	}
	if !slices.Equal(acks.acked, []string{"x"}) {
		t.Errorf("acked %v, want x once (for its dead letter)", acks.acked)
	}
}
