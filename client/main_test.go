package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/client"
	"github.com/foldline/foldline/internal/services"
)

// The package's tests, example and benchmark publish to the real Pulsar
// (scripts/stack up), into a tenant of their own: pulsarClient and tenant.
var (
	pulsarClient pulsar.Client
	tenant       string
)

// TestMain makes the tenant, or skips the whole package when Pulsar does
// not answer (fails under CI), as every integration test does: an example
// cannot skip on its own.
func TestMain(m *testing.M) {
	svc, err := services.LoadForTests()
	if err == nil {
		err = svc.CheckPulsar()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		fmt.Println("client: skipping the tests, which publish to Pulsar:", err)
		os.Exit(0)
	}
	admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
	if err == nil {
		tenant = fmt.Sprintf("clienttest%d", rand.Uint32())
		err = admin.Tenants().Create(utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}})
	}
	if err == nil {
		err = admin.Namespaces().CreateNamespace(tenant + "/ledger")
	}
	if err == nil {
		pulsarClient, err = pulsar.NewClient(svc.PulsarClientOptions())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: setting up tenant", tenant, err)
		os.Exit(1)
	}
	code := m.Run()
	pulsarClient.Close()
	if tn, err := utils.GetTopicName(client.DefaultTopic(tenant)); err == nil {
		_ = admin.Topics().Delete(*tn, true, true)
	}
	_ = admin.Namespaces().DeleteNamespace(tenant + "/ledger")
	_ = admin.Tenants().Delete(tenant)
	os.Exit(code)
}

// ledgerIDsOf reads the ids of every event in topic, in order.
func ledgerIDsOf(t testing.TB, topic string) []string {
	t.Helper()
	reader, err := pulsarClient.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var ids []string
	for reader.HasNext() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msg, err := reader.Next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		f, err := client.Fields(msg.Payload(), "id", "user", "time")
		if err != nil {
			t.Fatal(err)
		}
		if msg.Key() != f.Key || !msg.EventTime().Equal(f.Time) {
			t.Errorf("event %s: key %q at %v, want %q at %v", f.ID, msg.Key(), msg.EventTime(), f.Key, f.Time)
		}
		ids = append(ids, f.ID)
	}
	return ids
}
