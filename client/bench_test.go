package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/client"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/proc"
)

// BenchmarkPublish publishes shop events (foldline gen, every one with an
// id) to a ledger of its own with a Producer, and the same events with a
// plain pulsar-client-go producer of the same settings (LZ4, batches of at
// most 10 ms, no send timeout, 10 000 in flight) given each event's key
// and time read beforehand: what the Producer adds is reading each event's
// id, key and time. One op is one event; events/s is over the whole run,
// flush included, and cpu-µs/event is this process's CPU (the producer's
// and the Pulsar client's, not the broker's) per event, which holds still
// on a shared machine where the wall clock does not.
//
//	go test -run '^$' -bench Publish -benchtime 200000x ./client/
//
// With FOLDLINE_BENCH_JSON set, the Producer's events/s and CPU per event
// against the plain producer's go there (internal/benchreport): scripts/bench
// runs it as the bench "producer".
func BenchmarkPublish(b *testing.B) {
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: 100_000, Users: 2000, SKUs: 200, Seed: 5}); err != nil {
		b.Fatal(err)
	}
	events := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	rates, cpus := map[string]float64{}, map[string]float64{} // by contender
	defer emitPublishFigures(b, rates, cpus)
	run := 0
	topic := func() string {
		run++
		return fmt.Sprintf("%s-bench-%d", client.DefaultTopic(tenant), run)
	}
	b.Run("client", func(b *testing.B) {
		p, err := client.New(client.Options{Client: pulsarClient, Topic: topic()})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		var failed atomic.Int64
		done := func(err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		start, cpu := time.Now(), proc.CPUTime(os.Getpid())
		for i := 0; b.Loop(); i++ {
			p.PublishAsync(context.Background(), events[i%len(events)], done)
		}
		if err := p.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		rates["client"], cpus["client"] = report(b, start, cpu, failed.Load())
	})
	b.Run("plain", func(b *testing.B) {
		p, err := pulsarClient.CreateProducer(pulsar.ProducerOptions{Topic: topic(), SendTimeout: -1,
			CompressionType: pulsar.LZ4, BatchingMaxPublishDelay: 10 * time.Millisecond, MaxPendingMessages: 10_000})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		msgs := make([]pulsar.ProducerMessage, len(events))
		for i, e := range events {
			f, _ := client.Fields(e, "id", "user", "time")
			msgs[i] = pulsar.ProducerMessage{Payload: e, Key: f.Key, EventTime: f.Time}
		}
		var failed atomic.Int64
		done := func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				failed.Add(1)
			}
		}
		start, cpu := time.Now(), proc.CPUTime(os.Getpid())
		for i := 0; b.Loop(); i++ {
			msg := msgs[i%len(msgs)] // a copy: the producer owns what it is given
			p.SendAsync(context.Background(), &msg, done)
		}
		if err := p.Flush(); err != nil {
			b.Fatal(err)
		}
		rates["plain"], cpus["plain"] = report(b, start, cpu, failed.Load())
	})
}

// report reports and returns the events/s and the CPU µs per event.
func report(b *testing.B, start time.Time, cpu time.Duration, failed int64) (rate, cpuPerEvent float64) {
	if failed > 0 {
		b.Fatalf("%d events not published", failed)
	}
	rate = float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "events/s")
	used := proc.CPUTime(os.Getpid()) - cpu
	cpuPerEvent = float64(used.Microseconds()) / float64(b.N)
	b.ReportMetric(cpuPerEvent, "cpu-µs/event")
	return rate, cpuPerEvent
}

// emitPublishFigures emits the Producer's figures against the plain
// producer's, when both ran (a -bench pattern may leave one out). No aim:
// issue 45 asks for the figure.
func emitPublishFigures(b *testing.B, rates, cpus map[string]float64) {
	if _, ok := rates["client"]; !ok {
		return
	}
	if _, ok := rates["plain"]; !ok {
		return
	}
	err := benchreport.Emit(
		benchreport.Figure{Bench: "producer", Figure: "client.Producer, events/s", Value: rates["client"], Unit: "events/s"}.
			Against("plain producer", rates["plain"]),
		benchreport.Figure{Bench: "producer", Figure: "client.Producer, CPU per event", Value: cpus["client"], Unit: "µs"}.
			Against("plain producer", cpus["plain"]),
	)
	if err != nil {
		b.Error(err)
	}
}
