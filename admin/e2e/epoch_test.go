package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/testenv"
)

// TestShopViewsRefuseARecreatedLedger deletes the ledger topic under a
// running pipeline and ingests into its new incarnation, as after a
// cluster's metadata was lost while Cassandra kept the tables: the new
// incarnation has another epoch, and its operations on rows the old one
// built are rejected into the sink's dead-letter topic with the reason —
// never skipped as applied, never folded into the old rows.
func TestShopViewsRefuseARecreatedLedger(t *testing.T) {
	s := deployShop(t, "epoch")
	s.ingest(t, generate(t, 1000, 21))
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
	if err := admin.Topics().Delete(*ledger, true, true); err != nil {
		t.Fatalf("deleting the ledger topic: %v", err)
	}
	// validate's consumer reconnects and re-creates the topic with its
	// subscription at Earliest; ingest then gives the topic a new epoch.
	testenv.WaitFor(t, 2*time.Minute, "validate subscribed to the new ledger topic", func() bool {
		stats, err := admin.Topics().GetStats(*ledger)
		if err != nil {
			return false
		}
		_, ok := stats.Subscriptions["validate"]
		return ok
	})
	// The same users and skus: every operation lands on a row the old
	// incarnation built.
	s.ingest(t, generate(t, 300, 21))
	if now := epochOf(); now == "" || now == old {
		t.Fatalf("the re-created ledger has epoch %q, the old one had %q", now, old)
	}

	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dlq := "persistent://" + s.tenant + "/" + pipelineNS + "/user_activity-sink-dlq"
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: dlq, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("reading %s: %v", dlq, err)
	}
	defer reader.Close()
	deadline := time.Now().Add(3 * time.Minute)
	rejected := 0
	for rejected < 10 {
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		msg, err := reader.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s holds %d operations rejected for their epoch after 3 minutes, want 10", dlq, rejected)
		}
		if err != nil {
			t.Fatal(err)
		}
		reason := msg.Properties()[envelope.PropDeadLetterReason]
		if !strings.Contains(reason, "another epoch") {
			t.Fatalf("dead letter with reason %q, want the epoch named", reason)
		}
		rejected++
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
}
