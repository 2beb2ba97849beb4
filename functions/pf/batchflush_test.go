package pf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsaradmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/internal/testenv"
)

// The client keeps only a batching delay of batchBackstop or more; a
// shorter one is the runtime's to keep, and no batching means no delay.
func TestWithRuntimeDelay(t *testing.T) {
	for _, c := range []struct {
		name               string
		in                 pulsar.ProducerOptions
		clientDelay, delay time.Duration
	}{
		{"the default 10 ms", pulsar.ProducerOptions{BatchingMaxPublishDelay: 10 * time.Millisecond}, batchBackstop, 10 * time.Millisecond},
		{"batching off", pulsar.ProducerOptions{BatchingMaxPublishDelay: 10 * time.Millisecond, DisableBatching: true}, 10 * time.Millisecond, 0},
		{"no delay set (the client's default)", pulsar.ProducerOptions{}, 0, 0},
		{"the backstop itself", pulsar.ProducerOptions{BatchingMaxPublishDelay: batchBackstop}, batchBackstop, 0},
		{"longer than the backstop", pulsar.ProducerOptions{BatchingMaxPublishDelay: 5 * time.Second}, 5 * time.Second, 0},
	} {
		opts, delay := withRuntimeDelay(c.in)
		if opts.BatchingMaxPublishDelay != c.clientDelay || delay != c.delay || opts.DisableBatching != c.in.DisableBatching {
			t.Errorf("%s: the client's delay %s, the runtime's %s; want %s and %s", c.name, opts.BatchingMaxPublishDelay, delay, c.clientDelay, c.delay)
		}
	}
}

// The runtime, not the client's ticker, sends a batch its delay after the
// message that started it: with the client's delay pushed out to an hour,
// a lone message is still confirmed and read, and so is the next one, sent
// after the first batch went (the flush is armed again).
func TestRuntimeFlushesItsBatches(t *testing.T) {
	s := testenv.Pulsar(t)
	defer func(d time.Duration) { batchBackstop = d }(batchBackstop)
	batchBackstop = time.Hour
	client, err := pulsar.NewClient(s.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic := fmt.Sprintf("persistent://public/default/pftest-flush-%d", rand.IntN(1_000_000))
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "pftest-flush",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	prods := newProducers(client, func(topic string) pulsar.ProducerOptions {
		return pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 10 * time.Millisecond}
	})
	defer prods.close()
	for _, payload := range []string{"first", "second"} {
		confirmed := make(chan error, 1)
		if err := prods.sendAsync(t.Context(), topic, &pulsar.ProducerMessage{Payload: []byte(payload)}, doneFunc(func(err error) { confirmed <- err })); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-confirmed:
			if err != nil {
				t.Fatalf("sending %s: %v", payload, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s not confirmed after 30 s: its batch was never sent", payload)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		msg, err := consumer.Receive(ctx)
		cancel()
		if err != nil || string(msg.Payload()) != payload {
			t.Fatalf("read %v (%v), want %s", msg, err, payload)
		}
	}
	prod, err := prods.get(topic)
	if err != nil {
		t.Fatal(err)
	}
	if prod.delay != 10*time.Millisecond {
		t.Errorf("the runtime keeps a delay of %s, want 10ms", prod.delay)
	}
	// A partitioned topic's producer keeps the client's delay.
	partitioned := topic + "-partitioned"
	createPartitioned(t, s, partitioned, 2)
	if names, err := client.TopicPartitions(partitioned); err != nil || len(names) != 2 {
		t.Fatalf("the partitions of %s: %v, %v", partitioned, names, err)
	}
	if prod, err := prods.get(partitioned); err != nil {
		t.Fatal(err)
	} else if prod.delay != 0 {
		t.Errorf("the runtime keeps a delay of %s for a partitioned topic, want none (the client's)", prod.delay)
	}
}

// createPartitioned creates topic with n partitions, removed after the
// test.
func createPartitioned(t *testing.T, s testenv.Services, topic string, n int) {
	t.Helper()
	admin, err := pulsaradmin.New(s.PulsarAdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Topics().CreateWithContext(t.Context(), *tn, n); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	t.Cleanup(func() { _ = admin.Topics().Delete(*tn, true, false) })
}

// doneFunc is a sendDone of a func.
type doneFunc func(error)

func (f doneFunc) sent(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { f(err) }
