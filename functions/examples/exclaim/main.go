// Command exclaim is an example Pulsar Function: it appends "!" to every
// payload. A payload containing "boom" is a retryable failure and one
// containing "poison" a permanent one, so the runtime's retries and
// dead-letter topic (and foldline_dead_letters_total by reason) can be seen
// at work. It records the payload length as a user metric (functions stats
// shows its last value) and as a histogram of its own on the instance's
// metrics endpoint.
package main

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foldline/foldline/functions/pf"
)

// payloadBytes is registered with the first call's function context: the
// instance's labels come with its registerer.
var (
	payloadBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "exclaim_payload_bytes",
		Help:    "Sizes of the payloads exclaimed.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 6),
	})
	registerOnce sync.Once
)

func exclaim(ctx context.Context, in []byte) ([]pf.Record, error) {
	switch {
	case bytes.Contains(in, []byte("poison")):
		return nil, pf.Permanent(errors.New("payload is poison"))
	case bytes.Contains(in, []byte("boom")):
		return nil, errors.New("payload went boom")
	}
	if fc, ok := pf.FromContext(ctx); ok {
		registerOnce.Do(func() { _ = fc.MetricsRegisterer().Register(payloadBytes) })
		fc.RecordMetric("payload_bytes", float64(len(in)))
	}
	payloadBytes.Observe(float64(len(in)))
	return []pf.Record{{Payload: append(append([]byte(nil), in...), '!')}}, nil
}

func main() { pf.Start(exclaim) }
