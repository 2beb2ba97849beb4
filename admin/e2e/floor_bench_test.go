package e2e

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/sinks/cassandra"
)

// floorTable is the table foldInProcess writes.
const floorTable = "user_activity_floor"

// foldInProcess rebuilds user_activity the way a backfill does, but in this
// one process: a reader of the ledger, the validate and user-activity
// transformations called directly, and the sink's batcher and applier
// writing a table of their own with the building table's batches. No topic
// is crossed. Its time is the floor of any backfill design on this machine:
// the same reads, transformations and Cassandra writes, nothing else. The
// table must equal the fold of the ledger, or the floor would be a fake.
func foldInProcess(b *testing.B, s *shop, ledger string, n int) time.Duration {
	b.Helper()
	set, err := manifest.Load(s.opts.Dir)
	if err != nil {
		b.Fatalf("reading the manifests: %v", err)
	}
	set.Retarget(s.tenant, s.keyspace)
	view, err := set.ViewByName("user_activity")
	if err != nil {
		b.Fatal(err)
	}
	cfg := cassandra.Config{View: view.Schema(), Settings: cassandra.Settings{Hosts: []string{s.svc.CassandraHost}}.Defaults()}
	if cfg.Settings.Username, cfg.Settings.Password, err = s.svc.CassandraCredentials(); err != nil {
		b.Fatal(err)
	}
	cfg.View.Table = floorTable
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	applier, session, err := cassandra.Open(ctx, cfg)
	if err != nil {
		b.Fatalf("opening %s: %v", floorTable, err)
	}
	defer session.Close()
	defer applier.Close()
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		b.Fatalf("connecting to Pulsar: %v", err)
	}
	defer client.Close()

	start := time.Now()
	batcher := cassandra.NewBatcher(applier, cfg.Settings.BuildingCut(), cfg.Settings.Pipeline)
	go batcher.Run(ctx)
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: ledger, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 5000})
	if err != nil {
		b.Fatalf("reading %s: %v", ledger, err)
	}
	defer reader.Close()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure error
	)
	done := func(err error) {
		if err != nil {
			mu.Lock()
			failure = err
			mu.Unlock()
		}
		wg.Done()
	}
	for range n {
		msg, err := reader.Next(ctx)
		if err != nil {
			b.Fatalf("reading %s: %v", ledger, err)
		}
		id := msg.ID()
		origin := envelope.Origin{Topic: msg.Topic(), Position: envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}}
		valid, err := validate.Transformation.Process(transform.Message{Key: msg.Key(), EventTime: msg.EventTime(), Payload: msg.Payload(), Origin: origin})
		if err != nil {
			continue // a malformed line: the deployed path dead-letters it
		}
		for _, v := range valid {
			ops, err := useractivity.Transformation.Process(transform.Message{Key: v.Key, EventTime: v.EventTime, Payload: v.Payload, Origin: v.Origin})
			if err != nil {
				b.Fatalf("user-activity refused a valid event: %v", err)
			}
			for _, o := range ops {
				op, err := envelope.DecodeViewOp(o.Payload)
				if err != nil {
					b.Fatalf("decoding a view operation: %v", err)
				}
				wg.Add(1)
				if err := batcher.SubmitAsync(ctx, cassandra.Op{View: op, Origin: o.Origin}, done); err != nil {
					b.Fatalf("submitting a view operation: %v", err)
				}
			}
		}
	}
	wg.Wait()
	took := time.Since(start)
	if failure != nil {
		b.Fatalf("applying view operations: %v", failure)
	}
	got, err := s.userActivity(floorTable)
	if err != nil {
		b.Fatal(err)
	}
	if want := s.expected().UserActivity; !maps.Equal(got, want) {
		b.Fatalf("the in-process fold differs from the independent fold: %d rows against %d", len(got), len(want))
	}
	return took
}
