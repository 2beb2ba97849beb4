// Command exclaim is an example Pulsar Function: it appends "!" to every
// payload. A payload containing "boom" is a retryable failure and one
// containing "poison" a permanent one, so the runtime's retries and
// dead-letter topic can be seen at work. It records the payload length as a
// user metric.
package main

import (
	"bytes"
	"context"
	"errors"

	"github.com/foldline/foldline/functions/pf"
)

func exclaim(ctx context.Context, in []byte) ([]pf.Record, error) {
	switch {
	case bytes.Contains(in, []byte("poison")):
		return nil, pf.Permanent(errors.New("payload is poison"))
	case bytes.Contains(in, []byte("boom")):
		return nil, errors.New("payload went boom")
	}
	if fc, ok := pf.FromContext(ctx); ok {
		fc.RecordMetric("payload_bytes", float64(len(in)))
	}
	return []pf.Record{{Payload: append(append([]byte(nil), in...), '!')}}, nil
}

func main() { pf.Start(exclaim) }
