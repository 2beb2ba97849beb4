package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// LogWriter sends what a command writes (progress, results) to the test's
// log, one log entry per write.
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Helper()
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Publish sends n small messages to topic, keyed 0…n-1, one broker entry
// each (no batching).
func Publish(t testing.TB, svc Services, topic string, n int) {
	t.Helper()
	client, err := pulsar.NewClient(svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
	defer producer.Close()
	for i := range n {
		if _, err := producer.Send(t.Context(), &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: []byte("{}")}); err != nil {
			t.Fatalf("sending to %s: %v", topic, err)
		}
	}
}

// EnvInt reads a count from the environment variable name (a benchmark's
// size), or def when it is unset.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("reading %s=%q: %v", name, v, err)
	}
	return n
}

// EnvDuration reads a duration (as time.ParseDuration takes it, "90s")
// from the environment variable name, or def when it is unset.
func EnvDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("reading %s=%q: want a positive duration such as 90s or 10m", name, v)
	}
	return d
}

// TimeRead reads topic with a plain reader from its first message until n
// messages have come (receiver queue 5000, as the runtime's), or, for
// n < 0, every message it holds (a stage's output, whose count the caller
// does not know), and returns how long it took and how many it read: the
// limit the benchmarks measure a backfill against.
func TimeRead(t testing.TB, client pulsar.Client, topic string, n int) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 5000})
	if err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	read := 0
	for ; n < 0 && reader.HasNext() || read < n; read++ {
		if _, err := reader.Next(ctx); err != nil {
			t.Fatalf("reading event %d of %s: %v", read, topic, err)
		}
	}
	return time.Since(start), read
}
