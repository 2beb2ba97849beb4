package pf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/pf/localwire"
)

// LocalFlag runs the binary locally: with -local given before
// -instance-conf, the instance connects to no broker and reads its inputs
// from standard input and writes its outputs to standard output as
// localwire frames, each input's outputs followed by its Done frame. The
// handler, the origin positions, the dead letters and every output
// property are the ones a deployed instance makes: Foldline's in-process
// folds (verify, training sets) run the deployed binaries this way.
// Handlers are called without retries: a transformation is pure, so a
// retry gives the same error, and the input goes to the dead-letter topic
// at once.
const LocalFlag = "-local"

// runLocal runs the instance on in and out until in ends.
func (inst *instance) runLocal(ctx context.Context, in io.Reader, out io.Writer) error {
	// Every input is answered (Done) once its outputs are written, whatever
	// the deployed function's acknowledgement settings.
	inst.conf.MaxRetries, inst.conf.AutoAck, inst.conf.Guarantee = 0, true, atLeastOnce
	inst.untimed, inst.inputs, inst.local = true, new(slab[input]), true
	w := &localSink{w: localwire.NewWriter(out)}
	inst.sess = newSession(w)
	inst.pending = func() int { return 0 }
	r := localwire.NewReader(in)
	var msgs slab[localMessage]
	for {
		msg, err := readLocalInput(r, &msgs)
		if errors.Is(err, io.EOF) {
			inst.inFlight.Wait()
			return w.flush()
		}
		if err != nil {
			return err
		}
		w.setSeq(msg.f.Seq)
		if err := inst.process(ctx, msg, w); err != nil {
			return err
		}
		if err := inst.sess.err(); err != nil {
			return err // a local write failed: the driver is gone
		}
		if r.Buffered() == 0 {
			// Nothing more at hand: let the driver see what is done.
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
}

// readLocalInput reads the driver's next input frame as the message the
// runtime handles, made in msgs; io.EOF once the driver's input ends.
func readLocalInput(r *localwire.Reader, msgs *slab[localMessage]) (*localMessage, error) {
	kind, err := r.Next()
	if errors.Is(err, io.EOF) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reading local input: %w", err)
	}
	if kind != localwire.KindInput {
		return nil, fmt.Errorf("reading local input: %w: frame kind %q", localwire.ErrFrame, kind)
	}
	msg := msgs.new() // the frame and its message in one object
	if err := r.InputInto(&msg.f); err != nil {
		return nil, fmt.Errorf("reading local input: %w", err)
	}
	msg.id = localID{ledger: msg.f.Ledger, entry: msg.f.Entry, batch: int32(msg.f.Batch)}
	return msg, nil
}

// outputFrame is the Output frame of msg, sent to topic for input seq.
func outputFrame(seq uint64, topic string, msg *pulsar.ProducerMessage) *localwire.Output {
	return &localwire.Output{Seq: seq, Topic: topic, Key: msg.Key, Payload: msg.Payload, Properties: msg.Properties, EventTime: msg.EventTime}
}

// slab hands out new objects from chunks of slabSize: many small objects
// that live about as long as one another (the inputs and outputs of a
// batch) cost an allocation per chunk, not one each. A chunk is freed
// once none of its objects is in use. Not safe for concurrent use.
type slab[T any] struct{ free []T }

// slabSize is how many objects a slab's chunk holds: a chain's batch.
const slabSize = chainBatch

// new returns a zero T of the slab's.
func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		s.free = make([]T, slabSize)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// localSink writes an input's outputs and its Done frame. It is the
// instance's sender (every send confirmed at once) and acker.
type localSink struct {
	mu  sync.Mutex
	w   *localwire.Writer
	seq uint64
}

func (s *localSink) setSeq(seq uint64) {
	s.mu.Lock()
	s.seq = seq
	s.mu.Unlock()
}

func (s *localSink) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}

func (s *localSink) sendAsync(_ context.Context, topic string, msg *pulsar.ProducerMessage, done sendDone) error {
	s.mu.Lock()
	err := s.w.Output(outputFrame(s.seq, topic, msg))
	s.mu.Unlock()
	done.sent(nil, msg, err)
	return nil
}

// Ack writes the input's Done frame.
func (s *localSink) Ack(msg pulsar.Message) error {
	m, ok := msg.(*localMessage)
	if !ok {
		return fmt.Errorf("acknowledging %T locally", msg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Done(m.f.Seq)
}

// Nack is never called: a failed local write ends the run.
func (s *localSink) Nack(pulsar.Message) {}

// localMessage is an input frame as the pulsar.Message the runtime handles.
type localMessage struct {
	f  localwire.Input
	id localID
}

// localID is a local input's position: its own (a ledger event's) or, for
// a derived message, -1:-1:-1.
type localID struct {
	ledger, entry int64
	batch         int32
}

func (id *localID) Serialize() []byte {
	return pulsar.NewMessageID(id.ledger, id.entry, id.batch, -1).Serialize()
}
func (id *localID) LedgerID() int64     { return id.ledger }
func (id *localID) EntryID() int64      { return id.entry }
func (id *localID) BatchIdx() int32     { return id.batch }
func (id *localID) PartitionIdx() int32 { return -1 }
func (id *localID) BatchSize() int32    { return 0 }
func (id *localID) String() string {
	return pulsar.NewMessageID(id.ledger, id.entry, id.batch, -1).String()
}

func (m *localMessage) Topic() string                                   { return m.f.Topic }
func (m *localMessage) ProducerName() string                            { return "local" }
func (m *localMessage) Properties() map[string]string                   { return m.f.Properties }
func (m *localMessage) Payload() []byte                                 { return m.f.Payload }
func (m *localMessage) ID() pulsar.MessageID                            { return &m.id }
func (m *localMessage) PublishTime() time.Time                          { return m.f.PublishTime }
func (m *localMessage) EventTime() time.Time                            { return m.f.EventTime }
func (m *localMessage) Key() string                                     { return m.f.Key }
func (m *localMessage) OrderingKey() string                             { return "" }
func (m *localMessage) RedeliveryCount() uint32                         { return 0 }
func (m *localMessage) IsReplicated() bool                              { return false }
func (m *localMessage) GetReplicatedFrom() string                       { return "" }
func (m *localMessage) GetSchemaValue(any) error                        { return errors.New("local messages have no schema") }
func (m *localMessage) SchemaVersion() []byte                           { return nil }
func (m *localMessage) GetEncryptionContext() *pulsar.EncryptionContext { return nil }
func (m *localMessage) Index() *uint64                                  { return nil }
func (m *localMessage) BrokerPublishTime() *time.Time                   { return nil }
