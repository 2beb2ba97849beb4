package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// Input is one event handed to a transformation.
type Input[E any] struct {
	// Key is the message key: the entity the event is about.
	Key string
	// EventTime is the message's event time; zero when its producer set none.
	EventTime time.Time
	// Event is the decoded payload.
	Event E
}

// Func is a transformation as its author writes it. It must be pure: the same
// input gives the same outputs in the same order.
type Func[E any] func(in Input[E]) ([]Output, error)

// Decoder turns a message payload into a typed event, or says why it cannot.
type Decoder[E any] func(payload []byte) (E, error)

// Message is what a transformation receives, stripped of its transport.
type Message struct {
	Key       string
	EventTime time.Time
	Payload   []byte
	// Origin is the ledger event that caused this message; Process copies it
	// to the record it returns, or gives each of several records its own
	// position under it (envelope.Position.Child).
	Origin envelope.Origin
	// Delivery identifies the message on its topic (its serialized
	// message ID), "" when unknown: a stateful transformation tells a
	// redelivery of a message from an upstream stage's repeat of it by
	// it (see package keyed).
	Delivery string
}

// Record is one encoded output, ready for the function's output topic. Key
// and EventTime are always set (inherited from the input where the output
// left them empty).
type Record struct {
	Key       string
	EventTime time.Time
	// Payload is the encoded record: a record for the next topic, or the
	// JSON of a view operation. It is nil for a view operation that
	// ProcessOps returns unencoded (Op).
	Payload []byte
	Origin  envelope.Origin
	// Op is the view operation itself when ProcessOps returned it, nil
	// otherwise: what envelope.DecodeRowOp reads from the Payload that
	// Process returns for it, the same view, key, kind, columns and values,
	// and the same instant (EventTime's zone aside, which the wire writes
	// as an offset).
	Op *envelope.RowOp
}

// Processor is the pure step the runtime adapter and the contract suite
// drive. Process must not keep state between calls and must be safe to call
// from one goroutine at a time.
type Processor interface {
	Process(Message) ([]Record, error)
}

// ErrMalformed is matched (errors.Is) by the error Process returns when the
// payload does not decode into the transformation's event type.
var ErrMalformed = errors.New("malformed event")

// MalformedError wraps a decoder's error.
type MalformedError struct{ Err error }

func (e *MalformedError) Error() string { return "decoding event: " + e.Err.Error() }

// Unwrap returns the decoder's error.
func (e *MalformedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// DeadLetterReason classes the event's dead letter as malformed (package
// pf counts dead letters by reason).
func (e *MalformedError) DeadLetterReason() string { return "malformed" }

// Transformation binds a decoder and an author's function into a Processor.
type Transformation[E any] struct {
	decode Decoder[E]
	fn     Func[E]
}

// New returns the transformation that decodes each payload with decode and
// hands it to fn.
func New[E any](decode Decoder[E], fn Func[E]) *Transformation[E] {
	return &Transformation[E]{decode: decode, fn: fn}
}

// Process decodes m, runs the author's function and encodes its outputs.
func (t *Transformation[E]) Process(m Message) ([]Record, error) {
	return t.process(m, true)
}

// ProcessOps is Process for a caller in the process that folds the view
// operations (the one-process floor of a backfill, see admin/e2e): the
// same records, checked the same way, except that each view operation is
// handed over as the operation itself (Record.Op) instead of its JSON in
// Payload, which the caller would only decode again. Records for a topic
// are encoded as Process encodes them.
func (t *Transformation[E]) ProcessOps(m Message) ([]Record, error) {
	return t.process(m, false)
}

// process is Process, encoding view operations when encodeOps is set and
// handing them over as they are otherwise.
func (t *Transformation[E]) process(m Message, encodeOps bool) ([]Record, error) {
	ev, err := t.decode(m.Payload)
	if err != nil {
		return nil, &MalformedError{Err: err}
	}
	outs, err := t.fn(Input[E]{Key: m.Key, EventTime: m.EventTime, Event: ev})
	if err != nil {
		return nil, fmt.Errorf("transforming event: %w", err)
	}
	return encodeOutputs(outs, m, encodeOps)
}

// encodeOutputs turns an author's outputs of m into records, each with
// its own origin under m's.
func encodeOutputs(outs []Output, m Message, encodeOps bool) ([]Record, error) {
	recs := make([]Record, 0, len(outs))
	for i, out := range outs {
		rec, err := out.encode(m, encodeOps)
		if err != nil {
			return nil, fmt.Errorf("encoding output %d: %w", i, err)
		}
		// Several outputs of one input each get their own position under
		// its origin: a sink must tell the second add on a row from a
		// redelivery of the first.
		rec.Origin = m.Origin.Child(i, len(outs))
		recs = append(recs, rec)
	}
	return recs, nil
}

// Validator is implemented by event types that check themselves after JSON
// decoding; JSON calls it.
type Validator interface {
	Validate() error
}

// JSON is the Decoder for events that are JSON objects. It rejects anything
// but an object (null included), and calls Validate when *E or E implements
// Validator. Unknown fields are ignored so that producers may add fields.
func JSON[E any](payload []byte) (E, error) {
	var ev E
	var probe json.RawMessage
	if err := json.Unmarshal(payload, &probe); err != nil {
		return ev, err
	}
	if len(probe) == 0 || probe[0] != '{' {
		return ev, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return ev, err
	}
	if v, ok := any(&ev).(Validator); ok {
		return ev, v.Validate()
	}
	return ev, nil
}
