package pf

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestAfterSentSettlesBeforeTheAcknowledgement checks the order AfterSent
// promises: settle only once the outputs (or the dead letter) are
// confirmed, the acknowledgement only once settle says done, none when it
// fails, and nothing settled for a failed send.
func TestAfterSentSettlesBeforeTheAcknowledgement(t *testing.T) {
	tests := []struct {
		name      string
		fail      error // of the handler
		sendFails bool
		settleErr error
		wantSends []string
		wantAcked bool
		wantEnded bool
		wantDone  bool // settle was called
	}{
		{name: "outputs", wantSends: []string{outTopic}, wantAcked: true, wantDone: true},
		{name: "dead letter", fail: Permanent(errors.New("bad")), wantSends: []string{dlqTopic}, wantAcked: true, wantDone: true},
		{name: "settle fails", settleErr: errors.New("store down"), wantSends: []string{outTopic}, wantEnded: true, wantDone: true},
		{name: "send fails", sendFails: true, wantSends: []string{outTopic}, wantEnded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pending func(error)
			var sendsAtSettle int
			var out *fakeSender
			inst, sender := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]Record, error) {
				if !AfterSent(ctx, func(done func(error)) { sendsAtSettle = len(out.sent); pending = done }) {
					t.Fatal("AfterSent refused the handler's context")
				}
				if RunsLocally(ctx) {
					t.Error("RunsLocally under the worker")
				}
				if tt.fail != nil {
					return nil, tt.fail
				}
				return []Record{{Payload: in}}, nil
			})
			out = sender
			if tt.sendFails {
				out.fail[outTopic] = errors.New("broker gone")
			}
			acks := &fakeAcker{}
			if err := inst.process(t.Context(), ledgerEvent("x", 3), acks); err != nil {
				t.Fatal(err)
			}
			var topics []string
			for _, s := range out.sent {
				topics = append(topics, s.topic)
			}
			if !slices.Equal(topics, tt.wantSends) {
				t.Fatalf("sent to %v, want %v", topics, tt.wantSends)
			}
			if (pending != nil) != tt.wantDone {
				t.Fatalf("settle called: %v, want %v", pending != nil, tt.wantDone)
			}
			if pending != nil {
				if sendsAtSettle != len(tt.wantSends) {
					t.Errorf("settle called after %d sends, want after all %d", sendsAtSettle, len(tt.wantSends))
				}
				if len(acks.acked) != 0 {
					t.Fatalf("acknowledged %v before settle was done", acks.acked)
				}
				pending(tt.settleErr)
				pending(nil) // a second call changes nothing
			}
			if got := len(acks.acked) == 1; got != tt.wantAcked {
				t.Errorf("acknowledged: %v, want %v", acks.acked, tt.wantAcked)
			}
			if inst.sess.isEnded() != tt.wantEnded {
				t.Errorf("session ended: %v, want %v", inst.sess.isEnded(), tt.wantEnded)
			}
			inst.inFlight.Wait() // nothing left in flight
		})
	}
}

// TestAfterSentIsPerCall checks that a retried call starts without the
// registration of the call before.
func TestAfterSentIsPerCall(t *testing.T) {
	calls, settled := 0, 0
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]Record, error) {
		calls++
		if calls == 1 {
			AfterSent(ctx, func(done func(error)) { t.Error("the failed call's settle was called"); done(nil) })
			return nil, errors.New("transient")
		}
		return []Record{{Payload: in}}, nil
	})
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("x", 3), acks); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || settled != 0 || len(acks.acked) != 1 {
		t.Errorf("calls %d, settled %d, acked %v", calls, settled, acks.acked)
	}
}
