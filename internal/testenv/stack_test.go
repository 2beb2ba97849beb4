package testenv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/internal/testenv"
)

// These tests prove that the stack scripts/stack starts is real and usable:
// a Pulsar broker that publishes and consumes, an admin API that keeps
// policies, and a Cassandra node that stores rows.

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, rand.Uint32())
}

func TestPulsarPublishConsume(t *testing.T) {
	svc := testenv.Pulsar(t)
	client, err := pulsar.NewClient(svc.PulsarClientOptions())
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	t.Cleanup(client.Close)

	topic := "persistent://public/default/" + uniqueName("stack-test-")
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "stack-test",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	t.Cleanup(consumer.Close)
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("creating producer: %v", err)
	}
	t.Cleanup(producer.Close)

	const n = 100
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{
			Key:     fmt.Sprintf("k%d", i%7),
			Payload: []byte(fmt.Sprintf("event-%d", i)),
		}); err != nil {
			t.Fatalf("sending message %d: %v", i, err)
		}
	}
	for i := range n {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			t.Fatalf("receiving message %d: %v", i, err)
		}
		if got, want := string(msg.Payload()), fmt.Sprintf("event-%d", i); got != want {
			t.Fatalf("message %d: payload %q, want %q (order lost?)", i, got, want)
		}
		if got, want := msg.Key(), fmt.Sprintf("k%d", i%7); got != want {
			t.Fatalf("message %d: key %q, want %q", i, got, want)
		}
		if err := consumer.Ack(msg); err != nil {
			t.Fatalf("acknowledging message %d: %v", i, err)
		}
	}
}

func TestPulsarAdminTenantPolicies(t *testing.T) {
	svc := testenv.Pulsar(t)
	admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
	if err != nil {
		t.Fatalf("creating admin client: %v", err)
	}
	tenant := uniqueName("stacktest")
	ns := tenant + "/ledger"
	if err := admin.Tenants().Create(utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatalf("creating tenant %s: %v", tenant, err)
	}
	t.Cleanup(func() {
		_ = admin.Namespaces().DeleteNamespace(ns)
		_ = admin.Tenants().Delete(tenant)
	})
	if err := admin.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	infinite := utils.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
	if err := admin.Namespaces().SetRetention(ns, infinite); err != nil {
		t.Fatalf("setting retention on %s: %v", ns, err)
	}
	if err := admin.Namespaces().SetDeduplicationStatus(ns, true); err != nil {
		t.Fatalf("enabling deduplication on %s: %v", ns, err)
	}

	got, err := admin.Namespaces().GetRetention(ns)
	if err != nil {
		t.Fatalf("reading retention of %s: %v", ns, err)
	}
	if *got != infinite {
		t.Errorf("retention of %s = %+v, want %+v", ns, *got, infinite)
	}
	policies, err := admin.Namespaces().GetPolicies(ns)
	if err != nil {
		t.Fatalf("reading policies of %s: %v", ns, err)
	}
	if policies.DeduplicationEnabled == nil || !*policies.DeduplicationEnabled {
		t.Errorf("deduplication of %s = %v, want true", ns, policies.DeduplicationEnabled)
	}
}

func TestCassandraKeyspaceTableRows(t *testing.T) {
	svc := testenv.Cassandra(t)
	cluster, err := svc.CassandraCluster()
	if err != nil {
		t.Fatal(err)
	}
	cluster.Timeout = 30 * time.Second
	cluster.ConnectTimeout = 10 * time.Second
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connecting to %s: %v", svc.CassandraHost, err)
	}
	t.Cleanup(session.Close)

	ks := uniqueName("stacktest_")
	if err := session.Query(`CREATE KEYSPACE ` + ks +
		` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`).Exec(); err != nil {
		t.Fatalf("creating keyspace %s: %v", ks, err)
	}
	t.Cleanup(func() { _ = session.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec() })
	if err := session.Query(`CREATE TABLE ` + ks + `.users (user text PRIMARY KEY, visits bigint, seen timestamp)`).Exec(); err != nil {
		t.Fatalf("creating table: %v", err)
	}
	seen := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	rows := map[string]int64{"u1": 3, "u2": 5, "u3": 8}
	for user, visits := range rows {
		if err := session.Query(`INSERT INTO `+ks+`.users (user, visits, seen) VALUES (?, ?, ?)`, user, visits, seen).Exec(); err != nil {
			t.Fatalf("inserting %s: %v", user, err)
		}
	}
	iter := session.Query(`SELECT user, visits, seen FROM ` + ks + `.users`).Iter()
	var (
		user    string
		visits  int64
		gotSeen time.Time
		count   int
	)
	for iter.Scan(&user, &visits, &gotSeen) {
		count++
		if rows[user] != visits {
			t.Errorf("row %s: visits %d, want %d", user, visits, rows[user])
		}
		if !gotSeen.Equal(seen) {
			t.Errorf("row %s: seen %v, want %v", user, gotSeen, seen)
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("reading rows: %v", err)
	}
	if count != len(rows) {
		t.Errorf("read %d rows, want %d", count, len(rows))
	}
}
