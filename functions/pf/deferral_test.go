package pf

import (
	"context"
	"errors"
	"fmt"
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

// TestDeferWithoutFunctionContext defers every input through pf.Defer (the
// handler takes no FunctionContext, as the Cassandra sink does after its
// first input) and reports the outcomes later, out of order, from another
// goroutine: every input is sent and acknowledged once, its own output
// with its own origin, and the runtime reused the state of inputs that
// were over.
func TestDeferWithoutFunctionContext(t *testing.T) {
	const n = 40
	type deferred struct {
		complete func(error)
		payload  string
	}
	handed := make(chan deferred, n)
	contexts := map[context.Context]bool{}
	handler := func(ctx context.Context, payload []byte) ([]Record, error) {
		contexts[ctx] = true
		in, ok := InputOf(ctx)
		if !ok {
			return nil, errors.New("no input")
		}
		complete, ok := Defer(ctx)
		if !ok {
			return nil, errors.New("no deferral")
		}
		handed <- deferred{complete, string(payload)}
		return []Record{{Payload: fmt.Appendf(nil, "%s@%s", payload, in.Origin.Position)}}, nil
	}
	inst, out := newTestInstance(t, testConf(), handler)
	acks := &fakeAcker{}
	// The outcomes of each pair of inputs come from another goroutine, the
	// second input's first, once the next pair has been taken.
	pairs := make(chan struct{})
	go func() {
		for range pairs {
			a, b := <-handed, <-handed
			b.complete(nil)
			a.complete(nil)
		}
	}()
	for i := range n {
		if err := inst.process(t.Context(), ledgerEvent(fmt.Sprint(i), int64(i)), acks); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 && i > 1 {
			pairs <- struct{}{}
		}
	}
	pairs <- struct{}{}
	close(pairs)
	inst.inFlight.Wait()
	out.mu.Lock()
	defer out.mu.Unlock()
	got := map[string]bool{}
	for _, s := range out.sent {
		got[string(s.msg.Payload)] = true
	}
	for i := range n {
		if want := fmt.Sprintf("%d@7:%d:1", i, i); !got[want] {
			t.Errorf("no output %q among %d", want, len(out.sent))
		}
	}
	if len(out.sent) != n || len(acks.acked) != n {
		t.Errorf("sent %d, acknowledged %d; want %d of each", len(out.sent), len(acks.acked), n)
	}
	if len(contexts) == n {
		t.Errorf("no input's state was reused in %d deferred inputs", n)
	}
}

// When the handler acknowledges (MANUAL, or auto-ack off), a deferred
// input whose outcome is a transient error is negatively acknowledged, so
// that it comes again rather than staying pending until the consumer
// closes; under ATMOST_ONCE it was acknowledged on receipt and is not.
func TestDeferredTransientErrorWithoutAutoAck(t *testing.T) {
	tests := []struct {
		name                string
		guarantee           guarantee
		autoAck             bool
		wantAcked, wantNack []string
		wantEnded           bool
	}{
		{name: "auto-ack off", guarantee: atLeastOnce, autoAck: false, wantNack: []string{"x"}},
		{name: "manual", guarantee: manual, autoAck: true, wantNack: []string{"x"}},
		{name: "at most once", guarantee: atMostOnce, autoAck: true, wantAcked: []string{"x"}},
		{name: "auto-ack ends the session", guarantee: atLeastOnce, autoAck: true, wantEnded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := testConf()
			conf.Guarantee, conf.AutoAck = tt.guarantee, tt.autoAck
			var complete func(error)
			inst, out := newTestInstance(t, conf, func(ctx context.Context, in []byte) ([]Record, error) {
				fc, _ := FromContext(ctx)
				complete = fc.Defer()
				return []Record{{Payload: in}}, nil
			})
			acks := &fakeAcker{}
			if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); err != nil {
				t.Fatal(err)
			}
			complete(errors.New("cassandra is down"))
			inst.inFlight.Wait()
			if !slices.Equal(acks.acked, tt.wantAcked) || !slices.Equal(acks.nacked, tt.wantNack) || len(out.sent) != 0 {
				t.Errorf("acked %v, nacked %v, sent %d; want acked %v, nacked %v, nothing sent", acks.acked, acks.nacked, len(out.sent), tt.wantAcked, tt.wantNack)
			}
			if ended := inst.sess.isEnded(); ended != tt.wantEnded {
				t.Errorf("session ended: %v, want %v", ended, tt.wantEnded)
			}
		})
	}
}
