package pf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// orderedProducer models what per-key order rests on in pulsar-client-go
// v0.19 with the send timeout off: it confirms messages in send order and,
// when a send fails, fails every message still pending with it. From send
// number holdFrom on it holds messages pending; send number failAt then
// fails them all (the producer closed, fenced, or a backlog quota). Send
// number refuse is refused before it is queued, as when the producer cannot
// be created. Other sends are confirmed at once, in order.
type orderedProducer struct {
	holdFrom, failAt, refuse int

	mu        sync.Mutex
	sends     int
	pending   []heldSend
	published []string // payloads, in the order the topic holds them
}

type heldSend struct {
	msg  *pulsar.ProducerMessage
	done sendDone
}

var errBrokerGone = errors.New("producer closed")

func (p *orderedProducer) sendAsync(_ context.Context, _ string, msg *pulsar.ProducerMessage, done sendDone) error {
	p.mu.Lock()
	p.sends++
	n := p.sends
	if n == p.refuse {
		p.mu.Unlock()
		return fmt.Errorf("creating producer: %w", errBrokerGone)
	}
	if n >= p.holdFrom && p.holdFrom > 0 && p.failAt >= n {
		p.pending = append(p.pending, heldSend{msg, done})
		var failed []heldSend
		if n == p.failAt {
			failed, p.pending = p.pending, nil
		}
		p.mu.Unlock()
		for _, h := range failed {
			h.done.sent(nil, h.msg, errBrokerGone)
		}
		return nil
	}
	p.published = append(p.published, string(msg.Payload))
	p.mu.Unlock()
	done.sent(nil, msg, nil)
	return nil
}

// recordingAcker records acknowledgements by payload.
type recordingAcker struct {
	mu            sync.Mutex
	acked, nacked map[string]bool
}

func (a *recordingAcker) Ack(m pulsar.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked[string(m.Payload())] = true
	return nil
}

func (a *recordingAcker) Nack(m pulsar.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nacked[string(m.Payload())] = true
}

// A failed send must not let later inputs of the same key overtake it: a
// sink skips an operation whose position is older than its row's last
// applied one. The inputs go round as a failover subscription delivers
// them: after a reconnect (or a negative acknowledgement's delay) every
// input not acknowledged comes again, in input order. The test folds what
// the output topic finally holds as a sink does, per key skipping what is
// not newer than the last applied, and wants every input applied, in order.
func TestFailedSendKeepsPerKeyOrder(t *testing.T) {
	tests := []struct {
		name     string
		producer *orderedProducer
	}{
		{name: "pending sends fail together", producer: &orderedProducer{holdFrom: 4, failAt: 6}},
		{name: "a send is refused before it is queued", producer: &orderedProducer{refuse: 5}},
		{name: "the first send fails", producer: &orderedProducer{holdFrom: 1, failAt: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, _ := newTestInstance(t, testConf(), func(in []byte) ([]byte, error) { return in, nil })
			var inputs []*fakeMessage
			for i := range 12 {
				m := ledgerEvent(fmt.Sprintf("m%02d", i), int64(i))
				m.key = fmt.Sprintf("k%d", i%3)
				inputs = append(inputs, m)
			}
			acks := &recordingAcker{acked: map[string]bool{}, nacked: map[string]bool{}}
			remaining := inputs
			for round := 0; len(remaining) > 0; round++ {
				if round == 5 {
					t.Fatalf("inputs %v still not acknowledged after 5 rounds", payloads(remaining))
				}
				inst.sess = newSession(tt.producer)
				for _, m := range remaining {
					if inst.sess.isEnded() {
						break // the loop takes no more input; the rest comes again
					}
					if err := inst.process(t.Context(), m, acks); err != nil {
						t.Fatal(err)
					}
				}
				remaining = slices.DeleteFunc(slices.Clone(inputs), func(m *fakeMessage) bool { return acks.acked[string(m.payload)] })
				clear(acks.nacked)
			}

			// Fold the topic as a sink does.
			index := map[string]int{}
			for i, m := range inputs {
				index[string(m.payload)] = i
			}
			last := map[string]int{}
			applied := map[string][]int{}
			for _, p := range tt.producer.published {
				i := index[p]
				key := inputs[i].key
				if prev, seen := last[key]; seen && i <= prev {
					continue // skipped as already applied
				}
				last[key] = i
				applied[key] = append(applied[key], i)
			}
			for k := range 3 {
				key := fmt.Sprintf("k%d", k)
				var want []int
				for i := k; i < len(inputs); i += 3 {
					want = append(want, i)
				}
				if !slices.Equal(applied[key], want) {
					t.Errorf("key %s: applied inputs %v, want %v (topic holds %v)", key, applied[key], want, tt.producer.published)
				}
			}
		})
	}
}

func payloads(ms []*fakeMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.payload))
	}
	return out
}
