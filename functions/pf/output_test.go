package pf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

func TestOriginOf(t *testing.T) {
	tests := []struct {
		name    string
		props   map[string]string
		want    envelope.Origin
		wantErr string
	}{
		{name: "ledger event", props: map[string]string{"type": "x"}, want: envelope.Origin{Topic: inTopic, Position: envelope.Position{Ledger: 7, Entry: 4, Batch: 1}}},
		{name: "derived", props: map[string]string{envelope.PropOrigin: "1:2:3 persistent://t/n/l"},
			want: envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3}}},
		{name: "derived, written before the origin was one property", props: map[string]string{envelope.PropOriginTopic: "persistent://t/n/l", envelope.PropOriginPosition: "1:2:3"},
			want: envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3}}},
		{name: "ledger event with epoch", props: map[string]string{envelope.PropLedgerEpoch: "ep-1"}, want: envelope.Origin{Topic: inTopic, Position: envelope.Position{Ledger: 7, Entry: 4, Batch: 1, Epoch: "ep-1"}}},
		{name: "derived with path and epoch", props: map[string]string{envelope.PropOrigin: "1:2:3/1/0@ep-1 persistent://t/n/l"},
			want: envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3, Path: "/1/0", Epoch: "ep-1"}}},
		{name: "bad position", props: map[string]string{envelope.PropOrigin: "1:2 persistent://t/n/l"}, wantErr: "want ledger:entry:batch"},
		{name: "no topic", props: map[string]string{envelope.PropOrigin: "1:2:3"}, wantErr: "want position, a space and the ledger topic"},
		{name: "bad legacy position", props: map[string]string{envelope.PropOriginTopic: "persistent://t/n/l", envelope.PropOriginPosition: "1:2"}, wantErr: "want ledger:entry:batch"},
		{name: "no legacy position", props: map[string]string{envelope.PropOriginTopic: "persistent://t/n/l"}, wantErr: "want ledger:entry:batch"},
		{name: "empty legacy topic", props: map[string]string{envelope.PropOriginTopic: "", envelope.PropOriginPosition: "1:2:3"}, wantErr: "is missing"},
		{name: "no legacy topic", props: map[string]string{envelope.PropOriginPosition: "1:2:3"}, wantErr: "is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := ledgerEvent("x", 4)
			msg.props = tt.props
			got, err := originOf(context.Background(), msg, nil)
			if tt.wantErr != "" {
				_, envErr := envelope.OriginFromProperties(tt.props)
				if err == nil || err.Error() != envErr.Error() || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v, want envelope's %v", err, envErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("originOf = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// A ledger event that carries no epoch of its own (published by a producer
// other than foldline ingest) gets the one configured for its topic, or for
// its partitioned topic; an event's own epoch wins.
func TestOriginOfTakesTheConfiguredEpoch(t *testing.T) {
	epochs, err := parseLedgerEpochs(map[string]any{UserConfigLedgerEpochs: map[string]any{inTopic: "ep-conf", "persistent://t/n/parted": "ep-parted"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, topic string
		props       map[string]string
		wantEpoch   string
	}{
		{name: "no epoch of its own", topic: inTopic, props: map[string]string{}, wantEpoch: "ep-conf"},
		{name: "its own epoch wins", topic: inTopic, props: map[string]string{envelope.PropLedgerEpoch: "ep-own"}, wantEpoch: "ep-own"},
		{name: "a partition of a configured topic", topic: "persistent://t/n/parted-partition-3", props: map[string]string{}, wantEpoch: "ep-parted"},
		{name: "a topic not configured", topic: "persistent://t/n/other", props: map[string]string{}, wantEpoch: ""},
		{name: "a derived input keeps its origin's", topic: inTopic,
			props: map[string]string{envelope.PropOrigin: "1:2:3@ep-origin persistent://t/n/l"}, wantEpoch: "ep-origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := ledgerEvent("x", 4)
			msg.topic, msg.props = tt.topic, tt.props
			got, err := originOf(context.Background(), msg, epochs)
			if err != nil || got.Position.Epoch != tt.wantEpoch {
				t.Errorf("originOf = %v, %v; want epoch %q", got, err, tt.wantEpoch)
			}
		})
	}
}

func TestParseLedgerEpochsRefusesBadValues(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{name: "not a map", v: "ep-1", want: "want a map"},
		{name: "not a string", v: map[string]any{inTopic: 3.0}, want: "want an epoch string"},
		{name: "a short topic name", v: map[string]any{"events": "ep-1"}, want: "want a full name"},
		{name: "a bad epoch", v: map[string]any{inTopic: "bad epoch!"}, want: "epoch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseLedgerEpochs(map[string]any{UserConfigLedgerEpochs: tt.v})
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrBadConfig saying %q", err, tt.want)
			}
		})
	}
}

func TestOutputProperties(t *testing.T) {
	origin := envelope.Origin{Topic: "persistent://t/n/l", Position: envelope.Position{Ledger: 1, Entry: 2, Batch: 3}}
	epoched := origin
	epoched.Position.Epoch = "ep-1"
	// with returns props plus the origin at pos of topic persistent://t/n/l,
	// in form f.
	with := func(f originForm, pos string, props map[string]string) map[string]string {
		props = maps.Clone(props)
		if props == nil {
			props = map[string]string{}
		}
		if f == originSingle {
			props[envelope.PropOrigin] = pos + " " + origin.Topic
		} else {
			props[envelope.PropOriginTopic], props[envelope.PropOriginPosition] = origin.Topic, pos
		}
		return props
	}
	type x = map[string]string
	for _, f := range []originForm{originPair, originSingle} {
		other := originSingle - f
		carrying := with(f, "1:2:3", x{"type": "x"})
		tests := []struct {
			name      string
			in, rec   map[string]string
			origin    envelope.Origin
			want      map[string]string
			wantShare bool
		}{
			{name: "input carries the origin: shared", in: carrying, origin: origin, want: carrying, wantShare: true},
			{name: "record sets properties", in: carrying, rec: x{"type": "y"}, origin: origin, want: with(f, "1:2:3", x{"type": "y"})},
			{name: "ledger event gets the origin", in: x{"type": "x"}, origin: origin, want: carrying},
			{name: "position not as written: rewritten", in: with(f, "01:2:3", nil), origin: origin, want: with(f, "1:2:3", nil)},
			// The other form gives way: a reader prefers the single
			// property, and an older one reads only the pair.
			{name: "input in the other form: rewritten", in: with(other, "1:2:3", x{"type": "x"}), origin: origin, want: carrying},
			{name: "input in both forms: rewritten", in: with(other, "1:2:3", carrying), origin: origin, want: carrying},
			{name: "a record's own origin, in the other form", in: carrying, rec: with(other, "0:0:0", x{"type": "y"}), origin: origin,
				want: with(f, "0:0:0", x{"type": "y"})},
			{name: "a record's malformed origin is laid over as it is", in: x{}, rec: x{envelope.PropOriginPosition: "0:0"}, origin: origin,
				want: func() x { w := with(f, "1:2:3", nil); w[envelope.PropOriginPosition] = "0:0"; return w }()},
			{name: "no origin: a copy", in: x{"type": "x"}, want: x{"type": "x"}},
			// The position carries the epoch: ingest's property stays behind.
			{name: "ledger event with its epoch", in: x{"type": "x", envelope.PropLedgerEpoch: "ep-1"}, origin: epoched, want: with(f, "1:2:3@ep-1", x{"type": "x"})},
			{name: "a record may set the epoch property", in: x{envelope.PropLedgerEpoch: "ep-1"}, origin: epoched, rec: x{envelope.PropLedgerEpoch: "ep-2"},
				want: with(f, "1:2:3@ep-1", x{envelope.PropLedgerEpoch: "ep-2"})},
			{name: "no origin: the epoch property is kept", in: x{envelope.PropLedgerEpoch: "ep-1"}, want: x{envelope.PropLedgerEpoch: "ep-1"}},
		}
		for _, tt := range tests {
			// Rewritten in place, the input's map is the output's unless
			// the record sets properties (or there is no map).
			for _, rewrite := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d/rewrite=%v/%s", f, rewrite, tt.name), func(t *testing.T) {
					in, wantShare := tt.in, tt.wantShare
					if rewrite {
						in = maps.Clone(tt.in)
						wantShare = wantShare || len(tt.rec) == 0 && in != nil
					}
					before := fmt.Sprint(in)
					got := f.outputProperties(in, tt.origin, tt.rec, rewrite)
					if !reflect.DeepEqual(got, tt.want) {
						t.Errorf("properties %v, want %v", got, tt.want)
					}
					if shared := reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(in).UnsafePointer(); shared != wantShare {
						t.Errorf("shares the input's map: %v, want %v", shared, wantShare)
					}
					if fmt.Sprint(in) != before && !wantShare {
						t.Errorf("input properties changed to %v", in)
					}
					if o, err := envelope.OriginFromProperties(got); tt.origin != (envelope.Origin{}) && tt.rec[envelope.PropOriginPosition] != "0:0" && err != nil {
						t.Errorf("the output's origin does not read: %+v, %v", o, err)
					}
				})
			}
		}
	}
}

func TestParseOriginForm(t *testing.T) {
	for v, want := range map[any]originForm{nil: originPair, "pair": originPair, "single": originSingle, "SINGLE": originSingle} {
		uc := map[string]any{}
		if v != nil {
			uc[UserConfigOriginProperty] = v
		}
		if got, err := parseOriginForm(uc); err != nil || got != want {
			t.Errorf("%v: got %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []any{"both", 1.0} {
		if _, err := parseOriginForm(map[string]any{UserConfigOriginProperty: v}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%v: error %v, want ErrBadConfig", v, err)
		}
	}
}

// A failed send of one of several outputs names its topic, and ends the
// session once all sends are over, leaving the input unacknowledged.
func TestFailedSendOfSeveralOutputs(t *testing.T) {
	const audit = "persistent://t/n/audit"
	inst, out := newTestInstance(t, testConf(), func(context.Context, []byte) ([]Record, error) {
		return []Record{{Payload: []byte("1")}, {Topic: audit, Payload: []byte("2")}, {Payload: []byte("3")}}, nil
	})
	out.fail[audit] = errors.New("broker gone")
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); err != nil {
		t.Fatal(err)
	}
	if len(out.sent) != 3 || len(acks.acked)+len(acks.nacked) != 0 || !inst.sess.isEnded() {
		t.Fatalf("sent %d, acked %v, nacked %v, session ended %v; want 3 sent, the input left alone and the session ended",
			len(out.sent), acks.acked, acks.nacked, inst.sess.isEnded())
	}
	latest := inst.stats.latestExceptions(sinkException)
	if len(latest) != 1 || latest[0].text != "sending to "+audit+": broker gone" {
		t.Errorf("sink exceptions %+v, want one naming %s", latest, audit)
	}
}

// failingProducers cannot create producers.
type failingProducers struct{ fakeSender }

func (*failingProducers) sendAsync(_ context.Context, topic string, _ *pulsar.ProducerMessage, _ sendDone) error {
	return fmt.Errorf("creating producer for %s: %w", topic, errors.New("not allowed"))
}

func TestSendWithoutProducerIsASinkException(t *testing.T) {
	inst, _ := newTestInstance(t, testConf(), func(in []byte) ([]byte, error) { return in, nil })
	inst.sess = newSession(&failingProducers{})
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("x", 1), acks); err != nil {
		t.Fatal(err)
	}
	latest := inst.stats.latestExceptions(sinkException)
	if !inst.sess.isEnded() || len(latest) != 1 || latest[0].text != "creating producer for "+outTopic+": not allowed" {
		t.Errorf("session ended %v, sink exceptions %+v", inst.sess.isEnded(), latest)
	}
}

// An output larger than a message may be can never be sent: the input goes
// to the dead-letter topic with the reason, once, and is acknowledged; an
// input whose dead letter would be too large too is dead-lettered without
// its payload. A dead-letter reason is cut to maxReasonBytes.
func TestTooLargeIsDeadLettered(t *testing.T) {
	tests := []struct {
		name        string
		payload     int
		wantPayload bool
	}{
		{name: "output grows past the limit", payload: 20 << 10, wantPayload: true},
		{name: "input itself near the limit", payload: 31 << 10, wantPayload: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := testConf()
			conf.MaxMessageBytes = 32 << 10
			inst, out := newTestInstance(t, conf, func(in []byte) ([]byte, error) {
				return append(in, in...), nil // twice as large: over the limit
			})
			acks := &fakeAcker{}
			in := ledgerEvent(strings.Repeat("x", tt.payload), 1)
			in.props["big"] = "\xff" + strings.Repeat("é", 2000)
			in.key = "k"
			if err := inst.process(t.Context(), in, acks); err != nil {
				t.Fatal(err)
			}
			if len(out.sent) != 1 || out.sent[0].topic != dlqTopic {
				t.Fatalf("sent %d messages, want one dead letter", len(out.sent))
			}
			dl := out.sent[0].msg
			reason := dl.Properties[envelope.PropDeadLetterReason]
			if !strings.Contains(reason, "more than the 32768 a message may have") {
				t.Errorf("reason %q", reason)
			}
			if got := len(dl.Payload) > 0; got != tt.wantPayload {
				t.Errorf("dead letter carries the payload: %v, want %v", got, tt.wantPayload)
			}
			if !tt.wantPayload && dl.Properties[PropDeadLetterPayloadBytes] != strconv.Itoa(tt.payload) {
				t.Errorf("payload size property %q, want %d", dl.Properties[PropDeadLetterPayloadBytes], tt.payload)
			}
			if messageSize(dl) > conf.MaxMessageBytes || len(acks.acked) != 1 || inst.sess.isEnded() {
				t.Errorf("dead letter of %d bytes, acked %d, session ended %v", messageSize(dl), len(acks.acked), inst.sess.isEnded())
			}
			// The output was built from the input's properties in place
			// before it proved too large: the dead letter still names the
			// input, with its own properties when it carries them.
			wantOrigin := envelope.Origin{Topic: inTopic, Position: envelope.Position{Ledger: 7, Entry: 1, Batch: 1}}
			if o, err := envelope.OriginFromProperties(dl.Properties); err != nil || o != wantOrigin {
				t.Errorf("dead letter's origin %+v, %v; want %+v", o, err, wantOrigin)
			}
			if got := dl.Properties["type"] == "shop.order"; got != tt.wantPayload {
				t.Errorf("dead letter carries the input's properties: %v, want %v", got, tt.wantPayload)
			}
		})
	}
}

// The producer's own refusal (a broker whose maxMessageSize is below the
// runtime's maxMessageBytes) dead-letters the input too, and a dead letter
// refused as well goes again without the payload: never a loop.
func TestProducerRefusalAsTooLargeIsDeadLettered(t *testing.T) {
	inst, out := newTestInstance(t, testConf(), func(in []byte) ([]byte, error) { return in, nil })
	refused := 0
	out.failWith = func(msg *pulsar.ProducerMessage) error {
		if len(msg.Payload) > 0 {
			refused++
			return pulsar.ErrMessageTooLarge
		}
		return nil
	}
	acks := &fakeAcker{}
	if err := inst.process(t.Context(), ledgerEvent("payload", 1), acks); err != nil {
		t.Fatal(err)
	}
	if refused != 2 || len(out.sent) != 3 || out.sent[2].topic != dlqTopic || len(out.sent[2].msg.Payload) != 0 ||
		len(acks.acked) != 1 || inst.sess.isEnded() {
		t.Errorf("refused %d, sent %d, acked %v, session ended %v; want the output and the full dead letter refused, the bare one sent and acked",
			refused, len(out.sent), acks.acked, inst.sess.isEnded())
	}
}

func TestDeadLetterReasonIsCut(t *testing.T) {
	var pm pulsar.ProducerMessage
	originPair.setDeadLetter(&pm, ledgerEvent("x", 1), envelope.Origin{}, "t/n/f", 1, errors.New(strings.Repeat("r", 6<<20)))
	if reason := pm.Properties[envelope.PropDeadLetterReason]; len(reason) > maxReasonBytes || !strings.HasSuffix(reason, "[truncated from 6291456 bytes]") {
		t.Errorf("reason of %d bytes ending %q", len(reason), reason[len(reason)-40:])
	}
}
