package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/testenv"
)

// TestShopViewsRefuseARecreatedLedger deletes the ledger topic under a
// running pipeline and publishes into its new incarnation, as after a
// cluster's metadata was lost while Cassandra kept the tables: the new
// incarnation has another epoch, and its events of keys the old one
// folded are rejected into the dead-letter topic of the first stage that
// keeps state by position, the dedup stage, with the reason — never
// skipped as seen, never folded into the old rows. Events from foldline
// ingest carry the epoch themselves; events from a plain producer take it
// from the topic itself (the runtime reads the topic's property, and gives
// a topic that has none a fresh one), whether or not foldline deploy ran
// since the topic was created again.
func TestShopViewsRefuseARecreatedLedger(t *testing.T) {
	tests := []struct {
		name    string
		publish func(*shop, testing.TB, [][]byte)
		// redeploy runs foldline deploy after the topic is re-created, as
		// on a new cluster: it gives the topic an epoch and validate that
		// epoch.
		redeploy bool
	}{
		{name: "foldline ingest", publish: (*shop).ingest},
		{name: "a plain producer", publish: (*shop).produce, redeploy: true},
		{name: "a plain producer before any deploy", publish: (*shop).produce},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := deployShop(t, "epoch")
			tt.publish(s, t, generate(t, 1000, 21))
			s.waitForFold(t, 5*time.Minute)
			before, err := s.views(t)
			if err != nil {
				t.Fatal(err)
			}
			admin := s.pulsarAdmin(t)
			ledger, err := utils.GetTopicName(ingest.DefaultTopic(s.tenant))
			if err != nil {
				t.Fatal(err)
			}
			epochOf := func() string {
				props, err := admin.Topics().GetProperties(*ledger)
				if err != nil {
					t.Fatalf("reading the ledger's properties: %v", err)
				}
				return props[envelope.PropLedgerEpoch]
			}
			old := epochOf()
			if old == "" {
				t.Fatal("the deployed ledger topic has no epoch")
			}
			if err := admin.Topics().Delete(*ledger, true, true); err != nil {
				t.Fatalf("deleting the ledger topic: %v", err)
			}
			// dedup's consumer reconnects and re-creates the topic with
			// its subscription at Earliest.
			testenv.WaitFor(t, 2*time.Minute, "dedup subscribed to the new ledger topic", func() bool {
				stats, err := admin.Topics().GetStats(*ledger)
				if err != nil {
					return false
				}
				_, ok := stats.Subscriptions["dedup"]
				return ok
			})
			if tt.redeploy {
				if _, err := deploy.Deploy(t.Context(), s.opts); err != nil {
					t.Fatalf("deploying again: %v", err)
				}
			}
			// The same users and skus: every operation lands on a row the
			// old incarnation built.
			tt.publish(s, t, generate(t, 300, 21))
			s.requireEpochRejections(t, 10)
			if now := epochOf(); now == "" || now == old {
				t.Fatalf("the re-created ledger has epoch %q, the old one had %q", now, old)
			}
			after, err := s.views(t)
			if err != nil {
				t.Fatal(err)
			}
			for user, row := range before.UserActivity {
				if after.UserActivity[user] != row {
					t.Errorf("user_activity row %s changed from %+v to %+v: the new incarnation was folded into it", user, row, after.UserActivity[user])
				}
			}
		})
	}
}

// requireEpochRejections waits up to 3 minutes for n events in the dedup
// stage's dead-letter topic, each rejected for its epoch.
func (s *shop) requireEpochRejections(t *testing.T, n int) {
	t.Helper()
	dlq := "persistent://" + s.tenant + "/" + pipelineNS + "/dedup-dlq"
	for _, msg := range s.deadLetters(t, dlq, n, 3*time.Minute) {
		if reason := msg.Properties()[envelope.PropDeadLetterReason]; !strings.Contains(reason, "another epoch") {
			t.Fatalf("dead letter with reason %q, want the epoch named", reason)
		}
	}
}

// produce publishes lines to the ledger with a plain producer, as an
// application would: the user as the key, the event's time as its event
// time, and no properties (no epoch).
func (s *shop) produce(t testing.TB, lines [][]byte) {
	t.Helper()
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: ingest.DefaultTopic(s.tenant)})
	if err != nil {
		t.Fatalf("creating a producer: %v", err)
	}
	defer producer.Close()
	for _, line := range lines {
		var ev struct{ User, Time string }
		_ = json.Unmarshal(line, &ev) // malformed lines go as they are
		msg := &pulsar.ProducerMessage{Payload: line, Key: ev.User}
		if at, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
			msg.EventTime = at
		}
		producer.SendAsync(t.Context(), msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("publishing: %v", err)
			}
		})
	}
	if err := producer.Flush(); err != nil {
		t.Fatalf("flushing the producer: %v", err)
	}
	s.ledger = append(s.ledger, lines...)
}
