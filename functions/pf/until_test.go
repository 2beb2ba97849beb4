package pf

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// publishedAt is a ledger event with a publish time.
type publishedAt struct {
	*fakeMessage
	at time.Time
}

func (m publishedAt) PublishTime() time.Time { return m.at }

// TestCutoffSkipsLedgerEventsBeyondIt: with a cutoff (a replay as of a
// point), ledger events after it are acknowledged and counted without
// reaching the handler or any topic; events up to it, and every derived
// input, are handled as usual.
func TestCutoffSkipsLedgerEventsBeyondIt(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		userConfig map[string]any
	}{
		{"publish time", map[string]any{UserConfigUntilPublishTime: base.Add(2 * time.Second).Format(time.RFC3339Nano)}},
		{"position", map[string]any{UserConfigUntilPosition: "7:2:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := testConf()
			if err := conf.applyUserConfig(mustJSON(t, tc.userConfig)); err != nil {
				t.Fatal(err)
			}
			var handled []string
			inst, out := newTestInstance(t, conf, func(in []byte) ([]byte, error) {
				handled = append(handled, string(in))
				return in, nil
			})
			acks := &fakeAcker{}
			for entry := int64(1); entry <= 4; entry++ {
				msg := publishedAt{ledgerEvent(string(rune('a'+entry-1)), entry), base.Add(time.Duration(entry) * time.Second)}
				if err := inst.process(t.Context(), msg, acks); err != nil {
					t.Fatal(err)
				}
			}
			// A derived input carries its origin: never skipped, whatever
			// its position or publish time.
			derived := publishedAt{ledgerEvent("z", 9), base.Add(time.Hour)}
			derived.props = map[string]string{envelope.PropOriginTopic: inTopic, envelope.PropOriginPosition: "7:9:1"}
			if err := inst.process(t.Context(), derived, acks); err != nil {
				t.Fatal(err)
			}
			if want := []string{"a", "b", "z"}; !slices.Equal(handled, want) {
				t.Errorf("handled %q, want %q", handled, want)
			}
			if len(out.sent) != 3 {
				t.Errorf("%d outputs, want 3 (skipped events publish nothing)", len(out.sent))
			}
			if want := []string{"a", "b", "c", "d", "z"}; !slices.Equal(acks.acked, want) {
				t.Errorf("acknowledged %q, want %q (skipped events too)", acks.acked, want)
			}
			if got := inst.stats.processed.total.Load(); got != 5 {
				t.Errorf("processed %d, want 5", got)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCutoffConfig(t *testing.T) {
	for _, bad := range []map[string]any{
		{UserConfigUntilPublishTime: "yesterday"},
		{UserConfigUntilPosition: "7:x"},
		{UserConfigUntilPosition: 7},
	} {
		conf := testConf()
		if err := conf.applyUserConfig(mustJSON(t, bad)); !errors.Is(err, ErrBadConfig) {
			t.Errorf("user config %v: err %v, want ErrBadConfig", bad, err)
		}
	}
}

// seekingAcker is a consumer that records acknowledgements and moves of its
// subscription, each after what was acknowledged before it.
type seekingAcker struct {
	fakeAcker
	log []string
}

func (a *seekingAcker) Ack(m pulsar.Message) error {
	a.log = append(a.log, "ack "+string(m.Payload()))
	return a.fakeAcker.Ack(m)
}

func (a *seekingAcker) SeekByTime(time.Time) error {
	a.log = append(a.log, "seek")
	return nil
}

// A cutoff that ends a prefix of the ledger (a publish time or a position)
// moves the subscription to the end at the first event past it, once, after
// every earlier input is acknowledged; an event-time cutoff reads on (event
// times come in any order) and skips by each event's own time.
func TestCutoffSkipsTheRestOfTheLedger(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		userConfig map[string]any
		wantLog    []string
		partition  bool
	}{
		{"publish time", map[string]any{UserConfigUntilPublishTime: base.Add(2 * time.Second).Format(time.RFC3339Nano)},
			[]string{"ack a", "ack b", "ack c", "seek", "ack d"}, false},
		// The consumer would move every partition at once, skipping the
		// other partitions' earlier events: a partition reads on.
		{"publish time, a partition of the ledger", map[string]any{UserConfigUntilPublishTime: base.Add(2 * time.Second).Format(time.RFC3339Nano)},
			[]string{"ack a", "ack b", "ack c", "ack d"}, true},
		{"position", map[string]any{UserConfigUntilPosition: "7:2:1"},
			[]string{"ack a", "ack b", "ack c", "seek", "ack d"}, false},
		{"event time", map[string]any{UserConfigUntilEventTime: base.Add(2 * time.Second).Format(time.RFC3339Nano)},
			[]string{"ack a", "ack b", "ack c", "ack d"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := testConf()
			if err := conf.applyUserConfig(mustJSON(t, tc.userConfig)); err != nil {
				t.Fatal(err)
			}
			var handled []string
			inst, _ := newTestInstance(t, conf, func(in []byte) ([]byte, error) {
				handled = append(handled, string(in))
				return in, nil
			})
			acks := &seekingAcker{}
			// Event times: d is early (late to arrive), c late.
			eventTimes := []time.Duration{1, 2, 9, 0}
			for entry := int64(1); entry <= 4; entry++ {
				msg := publishedAt{ledgerEvent(string(rune('a'+entry-1)), entry), base.Add(time.Duration(entry) * time.Second)}
				msg.eventTime = base.Add(eventTimes[entry-1] * time.Second)
				if !tc.partition {
					msg.topic = strings.TrimSuffix(inTopic, "-partition-0") // a ledger of one topic
				}
				if err := inst.process(t.Context(), msg, acks); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(acks.log, tc.wantLog) {
				t.Errorf("consumer saw %q, want %q", acks.log, tc.wantLog)
			}
			if tc.name == "event time" && !slices.Equal(handled, []string{"a", "b", "d"}) {
				t.Errorf("handled %q, want a, b and the early d", handled)
			}
		})
	}
}
