package pf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// fakeID is a message id with a position.
type fakeID struct {
	pulsar.MessageID
	ledger, entry int64
	batch         int32
}

func (id fakeID) LedgerID() int64 { return id.ledger }
func (id fakeID) EntryID() int64  { return id.entry }
func (id fakeID) BatchIdx() int32 { return id.batch }
func (id fakeID) String() string  { return fmt.Sprintf("%d:%d:%d", id.ledger, id.entry, id.batch) }

// fakeMessage is an input message; methods the runtime does not call panic.
type fakeMessage struct {
	pulsar.Message
	topic, key string
	props      map[string]string
	payload    []byte
	id         fakeID
	eventTime  time.Time
}

func (m *fakeMessage) Topic() string                 { return m.topic }
func (m *fakeMessage) Key() string                   { return m.key }
func (m *fakeMessage) OrderingKey() string           { return "" }
func (m *fakeMessage) Properties() map[string]string { return m.props }
func (m *fakeMessage) Payload() []byte               { return m.payload }
func (m *fakeMessage) ID() pulsar.MessageID          { return m.id }
func (m *fakeMessage) EventTime() time.Time          { return m.eventTime }

// sent is one message a fakeSender was given.
type sent struct {
	topic string
	msg   *pulsar.ProducerMessage
}

// fakeSender records sends (copies: after its callback a message belongs
// to the runtime again, which reuses its room) and confirms them at once,
// failing sends to the topics in fail.
type fakeSender struct {
	mu   sync.Mutex
	sent []sent
	fail map[string]error
	// failWith, when set, decides the outcome of every send.
	failWith func(*pulsar.ProducerMessage) error
}

func (s *fakeSender) sendAsync(_ context.Context, topic string, msg *pulsar.ProducerMessage, done sendDone) error {
	s.mu.Lock()
	kept := *msg
	s.sent = append(s.sent, sent{topic, &kept})
	err := s.fail[topic]
	if s.failWith != nil {
		err = s.failWith(msg)
	}
	s.mu.Unlock()
	done.sent(nil, msg, err)
	return nil
}

// fakeAcker records acknowledgements by payload.
type fakeAcker struct {
	mu            sync.Mutex
	acked, nacked []string
}

func (a *fakeAcker) Ack(m pulsar.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked = append(a.acked, string(m.Payload()))
	return nil
}

func (a *fakeAcker) Nack(m pulsar.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nacked = append(a.nacked, string(m.Payload()))
}

const (
	inTopic  = "persistent://t/n/ledger-partition-0"
	outTopic = "persistent://t/n/out"
	dlqTopic = "persistent://t/n/f-DLQ"
)

func testConf() *instanceConf {
	return &instanceConf{
		Tenant: "t", Namespace: "n", Name: "f", Guarantee: atLeastOnce, AutoAck: true,
		OutputTopic: outTopic, DeadLetterTopic: dlqTopic, MaxRetries: 2, RetryBackoff: time.Millisecond,
		MaxMessageBytes: defaultMaxMessageBytes,
	}
}

func newTestInstance(t *testing.T, conf *instanceConf, handler any) (*instance, *fakeSender) {
	t.Helper()
	h, err := adaptHandler(handler)
	if err != nil {
		t.Fatal(err)
	}
	inst := newInstance(conf, h, io.Discard)
	out := &fakeSender{fail: map[string]error{}}
	inst.sess = newSession(out)
	return inst, out
}

func ledgerEvent(payload string, entry int64) *fakeMessage {
	return &fakeMessage{
		topic: inTopic, key: "k-" + payload, payload: []byte(payload),
		props: map[string]string{"type": "shop.order"}, id: fakeID{ledger: 7, entry: entry, batch: 1},
		eventTime: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestProcessKeepsKeyPropertiesAndOrigin(t *testing.T) {
	upstreamOrigin := envelope.Origin{Topic: "persistent://t/n/ledger-partition-3", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3}}
	derived := ledgerEvent("b", 9)
	derived.props = map[string]string{"type": "x"}
	upstreamOrigin.SetPairOn(derived.props)
	eventTime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name    string
		in      *fakeMessage
		handler any
		want    []sent
	}{
		{
			name:    "ledger event: origin is the message itself",
			in:      ledgerEvent("a", 5),
			handler: func(in []byte) ([]byte, error) { return append(in, '!'), nil },
			want: []sent{{outTopic, &pulsar.ProducerMessage{Payload: []byte("a!"), Key: "k-a", EventTime: ledgerEvent("a", 5).eventTime,
				Properties: map[string]string{"type": "shop.order", envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "7:5:1"}}}},
		},
		{
			name:    "derived event: origin carried over",
			in:      derived,
			handler: func(in []byte) ([]byte, error) { return in, nil },
			want: []sent{{outTopic, &pulsar.ProducerMessage{Payload: []byte("b"), Key: "k-b", EventTime: derived.eventTime,
				Properties: map[string]string{"type": "x", envelope.PropOriginTopic: upstreamOrigin.Topic, envelope.PropOriginPosition: "1:2:3"}}}},
		},
		{
			// Three outputs of one input: each gets its own position under
			// the origin (/0, /1, /2), unless a record sets its own.
			name: "records and Publish set topic, key, properties and time",
			in:   ledgerEvent("c", 6),
			handler: func(ctx context.Context, in []byte) ([]Record, error) {
				fc, _ := FromContext(ctx)
				if err := fc.Publish(ctx, Record{Topic: "persistent://t/n/audit", Payload: []byte("audit")}); err != nil {
					return nil, err
				}
				return []Record{
					{Key: "other", Payload: []byte("c1"), Properties: map[string]string{"type": "y"}, EventTime: eventTime},
					{Payload: []byte("c2"), Properties: map[string]string{envelope.PropOriginPosition: "0:0:0"}},
				}, nil
			},
			want: []sent{
				{"persistent://t/n/audit", &pulsar.ProducerMessage{Payload: []byte("audit"), Key: "k-c", EventTime: ledgerEvent("c", 6).eventTime,
					Properties: map[string]string{"type": "shop.order", envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "7:6:1/0"}}},
				{outTopic, &pulsar.ProducerMessage{Payload: []byte("c1"), Key: "other", EventTime: eventTime,
					Properties: map[string]string{"type": "y", envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "7:6:1/1"}}},
				{outTopic, &pulsar.ProducerMessage{Payload: []byte("c2"), Key: "k-c", EventTime: ledgerEvent("c", 6).eventTime,
					Properties: map[string]string{"type": "shop.order", envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "0:0:0"}}},
			},
		},
		{
			name:    "nil output sends nothing",
			in:      ledgerEvent("d", 7),
			handler: func([]byte) ([]byte, error) { return nil, nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, out := newTestInstance(t, testConf(), tt.handler)
			acks := &fakeAcker{}
			if err := inst.process(t.Context(), tt.in, acks); err != nil {
				t.Fatal(err)
			}
			assertSent(t, out.sent, tt.want)
			if len(acks.acked) != 1 || len(acks.nacked) != 0 {
				t.Errorf("acked %v, nacked %v; want the input acked once", acks.acked, acks.nacked)
			}
			if got := inst.stats.processed.total.Load(); got != 1 {
				t.Errorf("processed = %d, want 1", got)
			}
		})
	}
}

func assertSent(t *testing.T, got, want []sent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("sent %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.topic != w.topic || string(g.msg.Payload) != string(w.msg.Payload) || g.msg.Key != w.msg.Key ||
			!g.msg.EventTime.Equal(w.msg.EventTime) || fmt.Sprint(g.msg.Properties) != fmt.Sprint(w.msg.Properties) {
			t.Errorf("message %d:\n got %s %+v\nwant %s %+v", i, g.topic, *g.msg, w.topic, *w.msg)
		}
	}
}

func TestProcessFailures(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name         string
		maxRetries   int
		handler      func(calls int) error
		wantCalls    int
		wantAttempts string
		wantReason   string
	}{
		{name: "retried then dead-lettered", maxRetries: 2, handler: func(int) error { return errBoom }, wantCalls: 3, wantAttempts: "3", wantReason: "boom"},
		{name: "no retries", maxRetries: 0, handler: func(int) error { return errBoom }, wantCalls: 1, wantAttempts: "1", wantReason: "boom"},
		{name: "permanent skips retries", maxRetries: 5, handler: func(int) error { return Permanent(errBoom) }, wantCalls: 1, wantAttempts: "1", wantReason: "boom"},
		{name: "panic is a user error", maxRetries: 1, handler: func(int) error { panic("oops") }, wantCalls: 2, wantAttempts: "2", wantReason: "handler panicked: oops"},
		{name: "succeeds on a retry", maxRetries: 3, handler: func(calls int) error {
			if calls < 3 {
				return errBoom
			}
			return nil
		}, wantCalls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := testConf()
			conf.MaxRetries = tt.maxRetries
			calls := 0
			inst, out := newTestInstance(t, conf, func(in []byte) ([]byte, error) {
				calls++
				if err := tt.handler(calls); err != nil {
					return nil, err
				}
				return in, nil
			})
			acks := &fakeAcker{}
			if err := inst.process(t.Context(), ledgerEvent("x", 3), acks); err != nil {
				t.Fatal(err)
			}
			if calls != tt.wantCalls {
				t.Errorf("handler called %d times, want %d", calls, tt.wantCalls)
			}
			if len(acks.acked) != 1 {
				t.Errorf("acked %v, want the input acked once", acks.acked)
			}
			if got := inst.stats.exceptions[userException].total.Load(); got != int64(tt.wantCalls-boolInt(tt.wantReason == "")) {
				t.Errorf("user exceptions = %d", got)
			}
			if tt.wantReason == "" {
				want := &pulsar.ProducerMessage{}
				originPair.setOutput(want, ledgerEvent("x", 3), envelope.Origin{Topic: inTopic, Position: envelope.Position{Ledger: 7, Entry: 3, Batch: 1}}, &Record{Payload: []byte("x")}, false)
				assertSent(t, out.sent, []sent{{outTopic, want}})
				return
			}
			if len(out.sent) != 1 || out.sent[0].topic != dlqTopic {
				t.Fatalf("sent %+v, want one dead letter", out.sent)
			}
			dl := out.sent[0].msg
			wantProps := map[string]string{
				"type":                          "shop.order",
				envelope.PropOriginTopic:        inTopic,
				envelope.PropOriginPosition:     "7:3:1",
				envelope.PropDeadLetterReason:   tt.wantReason,
				envelope.PropDeadLetterSource:   inTopic,
				envelope.PropDeadLetterFunction: "t/n/f",
				envelope.PropDeadLetterAttempts: tt.wantAttempts,
			}
			if string(dl.Payload) != "x" || dl.Key != "k-x" || fmt.Sprint(dl.Properties) != fmt.Sprint(wantProps) {
				t.Errorf("dead letter %+v, want payload x, key k-x, properties %v", *dl, wantProps)
			}
			if inst.stats.processed.total.Load() != 0 {
				t.Error("a dead-lettered message counted as processed")
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestProcessMalformedOriginIsDeadLettered(t *testing.T) {
	inst, out := newTestInstance(t, testConf(), func(in []byte) ([]byte, error) {
		t.Error("handler called for a message with a malformed origin")
		return in, nil
	})
	in := ledgerEvent("x", 1)
	in.props = map[string]string{envelope.PropOriginTopic: "persistent://t/n/l", envelope.PropOriginPosition: "garbage"}
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), in, acks); err != nil {
		t.Fatal(err)
	}
	if len(out.sent) != 1 || out.sent[0].topic != dlqTopic || !strings.Contains(out.sent[0].msg.Properties[envelope.PropDeadLetterReason], "origin") {
		t.Errorf("sent %+v, want a dead letter about the origin", out.sent)
	}
	if len(acks.acked) != 1 {
		t.Errorf("acked %v", acks.acked)
	}
}

func TestProcessAcknowledgement(t *testing.T) {
	tests := []struct {
		name      string
		guarantee guarantee
		autoAck   bool
		failSend  bool
		wantAcked int
		wantEnded bool
	}{
		{name: "at least once acks after send", guarantee: atLeastOnce, autoAck: true, wantAcked: 1},
		{name: "at least once ends the session on a failed send", guarantee: atLeastOnce, autoAck: true, failSend: true, wantEnded: true},
		{name: "at most once acks on receipt", guarantee: atMostOnce, autoAck: true, wantAcked: 1},
		{name: "at most once does not nack a failed send", guarantee: atMostOnce, autoAck: true, failSend: true, wantAcked: 1},
		{name: "manual leaves it to the handler", guarantee: manual, autoAck: true},
		{name: "auto-ack off leaves it to the handler", guarantee: atLeastOnce, autoAck: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := testConf()
			conf.Guarantee, conf.AutoAck = tt.guarantee, tt.autoAck
			inst, out := newTestInstance(t, conf, func(in []byte) ([]byte, error) { return in, nil })
			if tt.failSend {
				out.fail[outTopic] = errors.New("broker gone")
			}
			acks := &fakeAcker{}
			if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); err != nil {
				t.Fatal(err)
			}
			if len(acks.acked) != tt.wantAcked || len(acks.nacked) != 0 {
				t.Errorf("acked %v nacked %v, want %d acked, none nacked", acks.acked, acks.nacked, tt.wantAcked)
			}
			if ended := inst.sess.isEnded(); ended != tt.wantEnded {
				t.Errorf("session ended: %v, want %v", ended, tt.wantEnded)
			}
			wantSink := int64(boolInt(tt.failSend))
			if got := inst.stats.exceptions[sinkException].total.Load(); got != wantSink {
				t.Errorf("sink exceptions = %d, want %d", got, wantSink)
			}
		})
	}
}

func TestManualAckAndDeadLetter(t *testing.T) {
	conf := testConf()
	conf.Guarantee, conf.MaxRetries = manual, 0
	inst, _ := newTestInstance(t, conf, func(ctx context.Context, in []byte) error {
		if string(in) == "bad" {
			return errors.New("bad")
		}
		fc, _ := FromContext(ctx)
		return fc.Ack()
	})
	acks := &fakeAcker{}
	for i, p := range []string{"good", "bad"} {
		msg := ledgerEvent(p, int64(i))
		if err := inst.process(t.Context(), msg, acks); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(acks.acked) != "[good bad]" {
		t.Errorf("acked %v, want the handler's ack of good and the runtime's of the dead letter bad", acks.acked)
	}
}

// Retries happen in place: a failing message's outputs come before those of
// the messages behind it, so order per partition holds.
func TestProcessKeepsOrderAcrossRetries(t *testing.T) {
	failuresLeft := map[string]int{"m2": 2}
	inst, out := newTestInstance(t, testConf(), func(in []byte) ([]byte, error) {
		if failuresLeft[string(in)] > 0 {
			failuresLeft[string(in)]--
			return nil, errors.New("transient")
		}
		return in, nil
	})
	acks := &fakeAcker{}
	for i, p := range []string{"m1", "m2", "m3"} {
		if err := inst.process(t.Context(), ledgerEvent(p, int64(i)), acks); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	for _, s := range out.sent {
		order = append(order, string(s.msg.Payload))
	}
	if fmt.Sprint(order) != "[m1 m2 m3]" || fmt.Sprint(acks.acked) != "[m1 m2 m3]" {
		t.Errorf("outputs %v, acks %v; want both in input order", order, acks.acked)
	}
}

func TestProcessStopsRetryingOnShutdown(t *testing.T) {
	conf := testConf()
	conf.RetryBackoff = time.Hour
	inst, out := newTestInstance(t, conf, func([]byte) error { return errors.New("down") })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	acks := &fakeAcker{}
	if err := inst.process(ctx, ledgerEvent("x", 1), acks); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if len(out.sent) != 0 || len(acks.acked)+len(acks.nacked) != 0 {
		t.Errorf("sent %v, acked %v, nacked %v; want the message left for redelivery", out.sent, acks.acked, acks.nacked)
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	conf := testConf()
	conf.RetryBackoff = 10 * time.Second
	inst, _ := newTestInstance(t, conf, func() {})
	tests := []struct {
		attempt int
		want    time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, maxRetryBackoff}, {50, maxRetryBackoff}}
	for _, tt := range tests {
		t.Run(fmt.Sprint("attempt ", tt.attempt), func(t *testing.T) {
			if got := inst.backoff(tt.attempt); got != tt.want {
				t.Errorf("backoff(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestPublishAfterReturnFails(t *testing.T) {
	var saved *FunctionContext
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context) error {
		saved, _ = FromContext(ctx)
		return nil
	})
	if err := inst.process(t.Context(), ledgerEvent("x", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}
	if err := saved.Publish(t.Context(), Record{Payload: []byte("late")}); err == nil {
		t.Error("Publish after the handler returned succeeded")
	}
}

// TestPublishAfterReturnFailsAfterLaterInputs checks that the state of an
// input whose handler took its FunctionContext is not reused (see
// input.recycle): a late Publish still fails after later inputs, whose
// handlers take nothing, and lands in none of their outputs.
func TestPublishAfterReturnFailsAfterLaterInputs(t *testing.T) {
	var saved *FunctionContext
	inst, out := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]byte, error) {
		if string(in) == "first" {
			saved, _ = FromContext(ctx)
		}
		return in, nil
	})
	acks := &fakeAcker{}
	for i, payload := range []string{"first", "second", "third", "fourth"} {
		if err := inst.process(t.Context(), ledgerEvent(payload, int64(i+1)), acks); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue
		}
		if err := saved.Publish(t.Context(), Record{Payload: []byte("late")}); err == nil {
			t.Fatalf("Publish after the handler returned succeeded after input %q", payload)
		}
	}
	var got []string
	for _, s := range out.sent {
		got = append(got, string(s.msg.Payload))
	}
	if want := []string{"first", "second", "third", "fourth"}; !slices.Equal(got, want) || !slices.Equal(acks.acked, want) {
		t.Errorf("sent %q, acknowledged %q; want %q for both", got, acks.acked, want)
	}
}

// TestReusedInputKeepsNothingOfTheLast processes inputs whose state the
// runtime reuses (the handler takes only InputOf), with and without key,
// event time and properties in turn: each output has its own input's and
// nothing of the one before; a goroutine that kept an earlier input's
// context can still use it as a context.
func TestReusedInputKeepsNothingOfTheLast(t *testing.T) {
	var kept context.Context
	contexts := map[context.Context]bool{}
	inst, out := newTestInstance(t, testConf(), func(ctx context.Context, payload []byte) ([]byte, error) {
		in, ok := InputOf(ctx)
		if !ok {
			return nil, errors.New("no input in the handler's context")
		}
		if kept == nil {
			kept = ctx
		}
		contexts[ctx] = true
		return append(payload, fmt.Sprintf(" key=%s origin=%s", in.Message.Key(), in.Origin)...), nil
	})
	const n = 20
	acks := &fakeAcker{}
	for i := range n {
		m := ledgerEvent(fmt.Sprint(i), int64(i))
		if i%2 == 1 {
			m.key, m.props, m.eventTime = "", nil, time.Time{}
		}
		if err := inst.process(t.Context(), m, acks); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.sent) != n {
		t.Fatalf("sent %d messages, want %d", len(out.sent), n)
	}
	for i, s := range out.sent {
		key, origin := "k-"+fmt.Sprint(i), fmt.Sprintf("7:%d:1", i)
		wantProps := 3
		if i%2 == 1 {
			key, wantProps = "", 2
		}
		m := s.msg
		if want := fmt.Sprintf("%d key=%s origin=%s %s", i, key, origin, inTopic); string(m.Payload) != want {
			t.Errorf("output %d is %q, want %q", i, m.Payload, want)
		}
		if m.Key != key || m.EventTime.IsZero() != (i%2 == 1) || m.Properties[envelope.PropOriginPosition] != origin || len(m.Properties) != wantProps {
			t.Errorf("output %d has key %q, event time %v, properties %v; want key %q, origin %s and %d properties", i, m.Key, m.EventTime, m.Properties, key, origin, wantProps)
		}
	}
	if len(contexts) == n {
		t.Errorf("no input's state was reused in %d inputs", n)
	}
	if kept.Err() != nil {
		t.Errorf("a kept context ended: %v", kept.Err())
	}
}

// BenchmarkProcess measures the runtime's own cost per message (identity
// handler, confirmed sends, acknowledgement), without a broker, for a ledger
// event: the output gets the origin properties added. Each message gets a
// properties map of its own, as pulsar-client-go gives each message it
// receives (making it is in the figure): the runtime rewrites a ledger
// event's in place for its one output.
func BenchmarkProcess(b *testing.B) {
	benchmarkProcess(b, ledgerEvent("payload-of-a-typical-size-payload-of-a-typical-size", 1), originPair)
}

// BenchmarkProcessSingle is BenchmarkProcess writing the origin as one
// property (originProperty single).
func BenchmarkProcessSingle(b *testing.B) {
	benchmarkProcess(b, ledgerEvent("payload-of-a-typical-size-payload-of-a-typical-size", 1), originSingle)
}

// BenchmarkProcessDerived is BenchmarkProcess for the common message of a
// later pipeline stage: one in, one out, with properties that already carry
// the origin, in the form the stage writes: passed on as they are.
func BenchmarkProcessDerived(b *testing.B) {
	msg := ledgerEvent("payload-of-a-typical-size-payload-of-a-typical-size", 1)
	benchOrigin.SetPairOn(msg.props)
	benchmarkProcess(b, msg, originPair)
}

// BenchmarkProcessDerivedSingle is BenchmarkProcessDerived with the origin
// as one property, in and out.
func BenchmarkProcessDerivedSingle(b *testing.B) {
	msg := ledgerEvent("payload-of-a-typical-size-payload-of-a-typical-size", 1)
	benchOrigin.SetOn(msg.props)
	benchmarkProcess(b, msg, originSingle)
}

var benchOrigin = envelope.Origin{Topic: "persistent://t/n/ledger-partition-3", Position: envelope.Position{Ledger: 123456, Entry: 7890, Batch: 12}}

func benchmarkProcess(b *testing.B, msg *fakeMessage, form originForm) {
	h, err := adaptHandler(func(in []byte) ([]byte, error) { return in, nil })
	if err != nil {
		b.Fatal(err)
	}
	conf := testConf()
	conf.OriginForm = form
	inst := newInstance(conf, h, io.Discard)
	inst.sess = newSession(nopSender{})
	acks := nopAcker{}
	props := msg.props
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		msg.props = maps.Clone(props)
		if err := inst.process(b.Context(), msg, acks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used (garbage collection
// included), which on a shared machine says more than the wall time per
// operation.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type nopSender struct{}

func (nopSender) sendAsync(_ context.Context, _ string, msg *pulsar.ProducerMessage, done sendDone) error {
	done.sent(nil, msg, nil)
	return nil
}

type nopAcker struct{}

func (nopAcker) Ack(pulsar.Message) error { return nil }
func (nopAcker) Nack(pulsar.Message)      {}

// TestProcessLeavesTheInputWhenTheHandlerFailedTheInstance: a handler that
// stops the instance (FunctionContext.Fail, as a stateful stage does when
// its state table cannot be opened) and returns an error leaves its input
// unacknowledged, to come again after the restart, instead of retrying it
// into the dead letters; the next input is not taken.
func TestProcessLeavesTheInputWhenTheHandlerFailedTheInstance(t *testing.T) {
	conf := testConf()
	conf.MaxRetries = 3
	errDown := errors.New("state table down")
	calls := 0
	inst, out := newTestInstance(t, conf, func(ctx context.Context, in []byte) ([]byte, error) {
		calls++
		fc, _ := FromContext(ctx)
		fc.Fail(errDown)
		return nil, errDown
	})
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); !errors.Is(err, errDown) {
		t.Fatalf("process = %v, want the fault", err)
	}
	if calls != 1 || len(out.sent) != 0 || len(acks.acked)+len(acks.nacked) != 0 {
		t.Errorf("handler called %d times, sent %v, acked %v, nacked %v; want one call and the input left for redelivery", calls, out.sent, acks.acked, acks.nacked)
	}
	stop, err := inst.take(t.Context(), pulsar.ConsumerMessage{Message: ledgerEvent("y", 2), Consumer: nil})
	if !stop || !errors.Is(err, errDown) || calls != 1 {
		t.Errorf("take after the fault = %v, %v (handler called %d times); want a stop with the fault before the handler", stop, err, calls)
	}
}
