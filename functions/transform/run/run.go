// Package run hands a transformation to Foldline's Pulsar function runtime
// (package pf). It is the only place where a transformation meets Pulsar: a
// transformation's main is one line,
//
//	func main() { run.Main(mytransform.Transformation) }
//
// for a stateful one (transform.NewStateful) too: run keeps its keys'
// states (package keyed) in memory in a local run and in its state table
// in Cassandra when deployed.
//
// Every error a transformation returns is about its input (it does no I/O),
// so it is marked permanent: the runtime sends the input to the dead-letter
// topic with the error text as the reason instead of retrying. Each output
// carries the input's origin position in its properties.
package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/foldline/foldline/functions/envelope"
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

// MainChain runs ps as one local chain (pf.StartChain): what ps[i] sends
// to its output topic is ps[i+1]'s input. Foldline's fused backfill
// builds a binary of one line, func main() { run.MainChain(a.T, b.T) },
// for a path whose functions are each func main() { run.Main(x.T) }.
//
// The last function's view operations go to the process that folds them
// (admin/internal/localrun), which reads them in their local form
// (envelope.RowOp.AppendLocal), not as JSON: the same operations, at less
// than two thirds of the CPU to write and read (BenchmarkRowOpRoundTrip).
func MainChain(ps ...transform.Processor) {
	handlers := make([]any, len(ps))
	for i, p := range ps {
		handlers[i] = Handler(p)
	}
	if n := len(ps); n > 0 {
		if last, ok := ps[n-1].(opsProcessor); ok {
			handlers[n-1] = handler(func(in transform.Message) ([]pf.Record, error) { return processLocal(last, in) })
		}
	}
	pf.StartChain(handlers...)
}

// opsProcessor is a transformation that can hand its view operations over
// unencoded (transform.Transformation.ProcessOps).
type opsProcessor interface {
	ProcessOps(transform.Message) ([]transform.Record, error)
}

// Handler adapts p to the runtime's handler shape. A stateful
// transformation (transform.KeyedProcessor) gets its keys' states: see
// keyedHandler.
func Handler(p transform.Processor) func(context.Context, []byte) ([]pf.Record, error) {
	if c, ok := p.(transform.Configurable); ok {
		return configuredHandler(c)
	}
	if kp, ok := p.(transform.KeyedProcessor); ok {
		return keyedHandler(kp)
	}
	return handler(func(in transform.Message) ([]pf.Record, error) { return Process(p, in) })
}

// handler adapts process to the runtime's handler shape.
func handler(process func(transform.Message) ([]pf.Record, error)) func(context.Context, []byte) ([]pf.Record, error) {
	return func(ctx context.Context, payload []byte) ([]pf.Record, error) {
		in, ok := pf.InputOf(ctx)
		if !ok {
			return nil, ErrNoFunctionContext
		}
		return process(transform.Message{
			Key:       in.Message.Key(),
			EventTime: eventTime(in.Message.EventTime()),
			Payload:   payload,
			Origin:    in.Origin,
		})
	}
}

// eventTime is a message's event time as transform.Message carries it:
// zero when the producer set none, which the Pulsar client reports as the
// Unix epoch (the protocol's 0 means unset). A transformation that folds
// by event time (a declared view's) then refuses the message instead of
// putting it in 1970.
func eventTime(t time.Time) time.Time {
	if t.UnixMilli() == 0 {
		return time.Time{}
	}
	return t
}

// Process is what the handler does once it has read the message from the
// runtime's context: it runs p and turns its records into the runtime's, or
// its error into a permanent one.
func Process(p transform.Processor, in transform.Message) ([]pf.Record, error) {
	recs, err := p.Process(in)
	if err != nil {
		return nil, pf.Permanent(err)
	}
	return records(recs, in), nil
}

// processLocal is Process with each view operation in its local form.
func processLocal(p opsProcessor, in transform.Message) ([]pf.Record, error) {
	recs, err := p.ProcessOps(in)
	if err != nil {
		return nil, pf.Permanent(err)
	}
	for i := range recs {
		if op := recs[i].Op; op != nil {
			if recs[i].Payload, err = op.AppendLocal(nil); err != nil {
				// As transform.Transformation.Process fails on it.
				return nil, pf.Permanent(fmt.Errorf("encoding output %d: encoding view operation on %s: %w", i, op.View, err))
			}
		}
	}
	return records(recs, in), nil
}

// records turns p's records of in into the runtime's.
func records(recs []transform.Record, in transform.Message) []pf.Record {
	out := make([]pf.Record, len(recs))
	for i, r := range recs {
		out[i] = pf.Record{Key: r.Key, Payload: r.Payload, EventTime: r.EventTime, Properties: originProperties(r.Origin, in.Origin, i, len(recs))}
	}
	return out
}

// originProperties returns the properties that give record i of n its
// origin, nil when the runtime gives it that origin anyway: the runtime
// puts the input's origin on output i of n as in.Child(i, n), as
// transform.Transformation does. A record that keeps it then costs no map
// of its own, and one of a derived input no copy of the input's
// properties either (package pf reuses them).
func originProperties(origin, in envelope.Origin, i, n int) map[string]string {
	if origin.IsZero() || origin.Topic == in.Topic && origin.Position.IsChild(in.Position, i, n) {
		return nil
	}
	props := make(map[string]string, 1)
	origin.SetOn(props)
	return props
}
