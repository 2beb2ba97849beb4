package testenv

import (
	"fmt"
	"strings"
	"testing"

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
