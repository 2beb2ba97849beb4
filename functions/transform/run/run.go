// Package run hands a transformation to Foldline's Pulsar function runtime
// (package pf). It is the only place where a transformation meets Pulsar: a
// transformation's main is one line,
//
//	func main() { run.Main(mytransform.Transformation) }
//
// Every error a transformation returns is about its input (it does no I/O),
// so it is marked permanent: the runtime sends the input to the dead-letter
// topic with the error text as the reason instead of retrying. Each output
// carries the input's origin position in its properties.
package run

import (
	"context"
	"errors"

	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/transform"
)

// ErrNoFunctionContext is returned by a handler called outside the runtime.
var ErrNoFunctionContext = errors.New("handler called without the function runtime's context")

// Main runs p as a Pulsar Function instance; it returns after a clean
// shutdown and exits the process on a fatal runtime error.
func Main(p transform.Processor) {
	pf.Start(Handler(p))
}

// Handler adapts p to the runtime's handler shape.
func Handler(p transform.Processor) func(context.Context, []byte) ([]pf.Record, error) {
	return func(ctx context.Context, payload []byte) ([]pf.Record, error) {
		fc, ok := pf.FromContext(ctx)
		if !ok {
			return nil, ErrNoFunctionContext
		}
		msg := fc.GetCurrentRecord()
		return Process(p, transform.Message{
			Key:       msg.Key(),
			EventTime: msg.EventTime(),
			Payload:   payload,
			Origin:    fc.Origin(),
		})
	}
}

// Process is what the handler does once it has read the message from the
// runtime's context: it runs p and turns its records into the runtime's, or
// its error into a permanent one.
func Process(p transform.Processor, in transform.Message) ([]pf.Record, error) {
	recs, err := p.Process(in)
	if err != nil {
		return nil, pf.Permanent(err)
	}
	out := make([]pf.Record, len(recs))
	for i, r := range recs {
		props := make(map[string]string, 2)
		if !r.Origin.IsZero() {
			r.Origin.SetOn(props)
		}
		out[i] = pf.Record{Key: r.Key, Payload: r.Payload, EventTime: r.EventTime, Properties: props}
	}
	return out, nil
}
