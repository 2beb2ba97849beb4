package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/internal/shopfold"
	"github.com/foldline/foldline/internal/testenv"
)

// The shop counts an event once per user and id however many times it is
// published (issue 45): its ledger's only reader is the dedup stage.

// TestIngestionCountsEachEventIDOnce publishes the same events again from
// another file, mixed with new ones, while the dedup stage is killed
// (kill -9) again and again; then once more after the broker has forgotten
// the file's producer: every copy reaches the ledger, and the views equal
// the fold of the distinct events.
func TestIngestionCountsEachEventIDOnce(t *testing.T) {
	s := deployShop(t, "ids")
	events := generate(t, 6000, 81)
	ledger := ingest.DefaultTopic(s.tenant)

	// A first file, then another that repeats a third of it and goes on,
	// with the dedup stage killed after each.
	first := events[:3000]
	s.ingest(t, first)
	s.kill(t, "dedup")
	s.ingest(t, events[2000:4500])
	s.kill(t, "dedup")
	s.ingest(t, events[4500:])
	s.waitForFold(t, 5*time.Minute)
	// The lines published twice, but those without an id (malformed).
	twice := events[2000:3000]
	withIDs := len(shopfold.FoldDistinct(append(slices.Clone(twice), twice...)).Duplicates)
	if dups := len(s.expected().Duplicates); dups != withIDs || withIDs < 900 {
		t.Fatalf("the fold skipped %d lines as seen before, want the %d of the 1000 published twice that have an id", dups, withIDs)
	}

	// The broker forgets a producer after hours without a message
	// (brokerDeduplicationProducerInactivityTimeoutMinutes, 6 h: a broker
	// setting, neither dynamic nor a namespace policy in Pulsar 4.0, so not
	// one a test may lower on a shared stack). What it then accepts —
	// the first file's lines under its producer name and sequence ids
	// again — is what it accepts with the namespace's deduplication off.
	republished := s.republishWithoutBrokerDedup(t, first)
	if republished != len(first) {
		t.Fatalf("the broker took %d of the %d lines published again, want all", republished, len(first))
	}
	s.ledger = append(s.ledger, first...)
	s.kill(t, "dedup")
	s.waitForFold(t, 5*time.Minute)

	if n := s.countMessages(t, ledger); n != len(s.ledger) {
		t.Errorf("the ledger holds %d events, want every one published, %d", n, len(s.ledger))
	}
	want := s.expected()
	var rows int
	if err := s.session.Query(`SELECT COUNT(*) FROM ` + s.keyspace + `.dedup_state`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("ledger: %d events, %d of them seen before; %d states (a user's bucket of ids each) in %s.dedup_state", len(s.ledger), len(want.Duplicates), rows, s.keyspace)
}

// republishWithoutBrokerDedup publishes lines as foldline ingest published
// them as a file (its producer name, the line numbers as sequence ids) with
// the ledger namespace's deduplication off, and turns it on again; it
// returns how many lines the broker took.
func (s *shop) republishWithoutBrokerDedup(t *testing.T, lines [][]byte) int {
	t.Helper()
	admin := s.pulsarAdmin(t)
	ns := s.tenant + "/ledger"
	topic := ingest.DefaultTopic(s.tenant)
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	setDedup := func(on bool) {
		t.Helper()
		if err := admin.Namespaces().SetDeduplicationStatus(ns, on); err != nil {
			t.Fatalf("turning deduplication of %s to %v: %v", ns, on, err)
		}
		testenv.WaitFor(t, time.Minute, fmt.Sprintf("deduplication %v on %s", on, topic), func() bool {
			stats, err := admin.Topics().GetInternalStats(*tn)
			if err != nil {
				return false
			}
			_, active := stats.Cursors["pulsar.dedup"]
			return active == on
		})
	}
	path := filepath.Join(t.TempDir(), "again.jsonl")
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	id, _, err := ingest.ContentID(path)
	if err != nil {
		t.Fatal(err)
	}
	setDedup(false)
	defer setDedup(true)

	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "foldline-ingest-" + id})
	if err != nil {
		t.Fatalf("creating producer: %v", err)
	}
	defer producer.Close()
	var taken atomic.Int64
	for i, line := range lines {
		seq := int64(i + 1)
		var ev struct{ User, Time string }
		_ = json.Unmarshal(line, &ev)
		msg := &pulsar.ProducerMessage{Payload: line, Key: ev.User, SequenceID: &seq}
		if at, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
			msg.EventTime = at
		}
		producer.SendAsync(context.Background(), msg, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err == nil && id.LedgerID() >= 0 {
				taken.Add(1)
			}
		})
	}
	if err := producer.Flush(); err != nil {
		t.Fatal(err)
	}
	return int(taken.Load())
}
