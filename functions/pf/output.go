package pf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/textcap"
)

// sender sends messages asynchronously, keeping the order of the sends of
// one topic. It calls done exactly once per message it accepts, from any
// goroutine, possibly before sendAsync returns; when it cannot hand the
// message to a producer it returns the error instead and never calls done.
type sender interface {
	sendAsync(ctx context.Context, topic string, msg *pulsar.ProducerMessage, done sendDone) error
}

// sendDone is told of each send's outcome, as pulsar.Producer.SendAsync's
// callback is. An interface, not a func: a sender that confirms at once
// (a local run's) then costs no closure per input.
type sendDone interface {
	sent(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

// callback returns done as the producer's callback: an input's is made
// once for all its outputs.
func callback(done sendDone) func(pulsar.MessageID, *pulsar.ProducerMessage, error) {
	if in, ok := done.(*input); ok {
		if in.callback == nil {
			in.callback = in.sent
		}
		return in.callback
	}
	return done.sent
}

// acker acknowledges input messages; pulsar.Consumer is one.
type acker interface {
	Ack(pulsar.Message) error
	Nack(pulsar.Message)
}

// originOf returns the origin position an input message carries, or the
// message's own topic and position when it carries none (a ledger event),
// with the ledger epoch ingest stamped on it or, for an event some other
// producer published, the epoch epochs finds for its topic (its
// incarnation's, see topicEpochs). A failure to find it is errEpochLookup.
func originOf(ctx context.Context, msg pulsar.Message, epochs epochFinder) (envelope.Origin, error) {
	props := msg.Properties()
	origin, err := envelope.OriginFromProperties(props)
	if !errors.Is(err, envelope.ErrNoOrigin) {
		return origin, err // derived, or malformed
	}
	id := msg.ID()
	epoch := props[envelope.PropLedgerEpoch]
	if epoch != "" {
		if err := envelope.CheckEpoch(epoch); err != nil {
			return envelope.Origin{}, fmt.Errorf("reading property %s of a ledger event: %w", envelope.PropLedgerEpoch, err)
		}
	} else if epochs != nil {
		if epoch, err = epochs.epochOf(ctx, msg.Topic(), id.LedgerID()); err != nil {
			return envelope.Origin{}, err
		}
	}
	return envelope.Origin{
		Topic:    msg.Topic(),
		Position: envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx(), Epoch: epoch},
	}, nil
}

// UserConfigOriginProperty chooses how outputs carry their origin: "pair"
// (the default: envelope.PropOriginTopic and PropOriginPosition, the form
// every reader understands, runtimes older than "single" included) or
// "single" (envelope.PropOrigin: one property less for each stage
// downstream to encode and decode, per message). A runtime that knows
// "single" reads both. A function may write "single" once every function
// that reads its output runs such a runtime: an older reader takes
// a message without the pair for a ledger event, its own position for
// the origin, and a redelivery across the upgrade would then apply twice.
// foldline deploy sets the key on every function it deploys, "single"
// where that holds (package deploy).
const UserConfigOriginProperty = "originProperty"

// originForm is UserConfigOriginProperty parsed.
type originForm int

const (
	originPair originForm = iota
	originSingle
)

// parseOriginForm reads UserConfigOriginProperty from a user config.
func parseOriginForm(userConfig map[string]any) (originForm, error) {
	i, err := userChoice(userConfig, UserConfigOriginProperty, "pair", "single")
	return originForm(i), err
}

// set writes origin into props in the form f, removing the other form.
func (f originForm) set(props map[string]string, origin envelope.Origin) {
	if f == originSingle {
		origin.SetOn(props)
		return
	}
	origin.SetPairOn(props)
}

// carries reports whether props hold origin exactly as set would write it,
// and not in the other form too.
func (f originForm) carries(props map[string]string, origin envelope.Origin) bool {
	if origin.IsZero() {
		return false
	}
	// The likeliest miss first: a ledger event carries no origin.
	if f == originSingle {
		text, ok := props[envelope.PropOrigin]
		if !ok || !origin.Is(text) {
			return false
		}
		_, hasTopic := props[envelope.PropOriginTopic]
		_, hasPos := props[envelope.PropOriginPosition]
		return !hasTopic && !hasPos
	}
	if topic, ok := props[envelope.PropOriginTopic]; !ok || topic != origin.Topic {
		return false
	}
	var buf [64]byte
	pos, ok := props[envelope.PropOriginPosition]
	_, single := props[envelope.PropOrigin]
	return ok && !single && pos == string(origin.Position.AppendTo(buf[:0]))
}

// setOutput fills pm, the message for rec, taking what rec leaves unset from
// the input: key, properties (rec's are laid over the input's), origin and
// event time. With rewrite, the input's properties may become the output's
// (see outputProperties): only for the one output of an input whose
// handler has returned.
func (f originForm) setOutput(pm *pulsar.ProducerMessage, in pulsar.Message, origin envelope.Origin, rec *Record, rewrite bool) {
	pm.Payload = rec.Payload
	pm.Key = rec.Key
	pm.Properties = f.outputProperties(in.Properties(), origin, rec.Properties, rewrite)
	pm.EventTime = rec.EventTime
	if pm.Key == "" {
		pm.Key = in.Key()
		pm.OrderingKey = in.OrderingKey()
	}
	if pm.EventTime.IsZero() {
		pm.EventTime = in.EventTime()
	}
}

// outputProperties returns a copy of the input's properties with the origin
// set in the form f and then the record's properties laid over them; a
// record that sets an origin of its own, in either form, gets it in the
// form f too. Next to an origin, neither the ledger epoch ingest stamps on
// a ledger event (envelope.PropLedgerEpoch), which the origin's position
// carries ("@epoch"), nor the origin's other form is copied: every property
// costs each stage downstream its encoding and decoding, per message. When
// the copy would equal the input's (an input that already carries the
// origin, a record that sets no properties) it returns the input's map
// itself: the producer does not modify a message's properties.
//
// With rewrite and a record that sets no properties, it rewrites the
// input's map in place and returns it instead of a copy: the input's one
// output of a ledger event, the common case, then costs no map and no copy
// (0.3 µs of CPU per message in BenchmarkProcessSingle, about a tenth of
// the identity function's CPU under the worker). The caller must own
// the map: the input's, with nothing reading it afterwards but a dead
// letter, which lays the same origin over it again (see
// FunctionContext.GetCurrentRecord).
func (f originForm) outputProperties(inProps map[string]string, origin envelope.Origin, recProps map[string]string, rewrite bool) map[string]string {
	if len(recProps) == 0 && f.carries(inProps, origin) {
		return inProps
	}
	props := inProps
	if !rewrite || inProps == nil || len(recProps) > 0 {
		props = make(map[string]string, len(inProps)+len(recProps)+2)
		maps.Copy(props, inProps)
	}
	err := envelope.ErrNoOrigin
	if len(recProps) > 0 {
		var own envelope.Origin
		if own, err = envelope.OriginFromProperties(recProps); err == nil {
			origin = own
		}
	}
	if !origin.IsZero() {
		delete(props, envelope.PropLedgerEpoch)
		f.set(props, origin)
	}
	for k, v := range recProps {
		if err != nil || !envelope.IsOriginProperty(k) {
			props[k] = v
		}
	}
	return props
}

// PropDeadLetterPayloadBytes is set on a dead letter sent without the
// input's payload and properties, because with them it would be larger than
// a message may be: it holds the payload's size in bytes.
const PropDeadLetterPayloadBytes = "foldline.dlq.payload-bytes"

// maxReasonBytes bounds a dead-letter reason, and the text of an exception
// that status and metrics show: an error can quote a whole input.
const maxReasonBytes = 4 << 10

// maxKeyBytes bounds the key of a dead letter sent without its payload.
const maxKeyBytes = 1 << 10

// defaultMaxMessageBytes is the broker's default maxMessageSize (5 MiB).
const defaultMaxMessageBytes = 5 << 20

// errTooLarge marks a message larger than any message may be.
var errTooLarge = errors.New("message too large")

// isTooLarge reports whether a send failed because the message is too
// large: the runtime's own check, or the producer's (larger than the
// broker's maxMessageSize).
func isTooLarge(err error) bool {
	return errors.Is(err, errTooLarge) || errors.Is(err, pulsar.ErrMessageTooLarge)
}

// messageSize estimates the bytes pm takes in a batch: its payload, key
// and properties, and room for the rest of its metadata.
func messageSize(pm *pulsar.ProducerMessage) int {
	const metadata = 512
	n := len(pm.Payload) + len(pm.Key) + len(pm.OrderingKey) + metadata
	for k, v := range pm.Properties {
		n += len(k) + len(v) + 8
	}
	return n
}

// setDeadLetter fills pm with the dead-letter message for an input that
// failed.
func (f originForm) setDeadLetter(pm *pulsar.ProducerMessage, in pulsar.Message, origin envelope.Origin, fqfn string, attempts int, reason error) {
	f.setOutput(pm, in, origin, &Record{
		Payload:    in.Payload(),
		Properties: deadLetterProperties(in, fqfn, attempts, reason),
	}, false)
}

// setBareDeadLetter fills pm with the dead-letter message for an input
// whose full dead letter is too large: the input's key (cut to
// maxKeyBytes), origin and event time, the dead-letter properties and the
// payload's size, but neither its payload nor its other properties.
func (f originForm) setBareDeadLetter(pm *pulsar.ProducerMessage, in pulsar.Message, origin envelope.Origin, fqfn string, attempts int, reason error) {
	props := deadLetterProperties(in, fqfn, attempts, reason)
	props[PropDeadLetterPayloadBytes] = strconv.Itoa(len(in.Payload()))
	pm.Properties = f.outputProperties(nil, origin, props, false)
	pm.Key = textcap.Truncate(in.Key(), maxKeyBytes)
	pm.EventTime = in.EventTime()
}

func deadLetterProperties(in pulsar.Message, fqfn string, attempts int, reason error) map[string]string {
	return map[string]string{
		envelope.PropDeadLetterReason:   textcap.Truncate(reason.Error(), maxReasonBytes),
		envelope.PropDeadLetterSource:   in.Topic(),
		envelope.PropDeadLetterFunction: fqfn,
		envelope.PropDeadLetterAttempts: strconv.Itoa(attempts),
	}
}

// producers holds one producer per topic, created on first use. Sends look
// their producer up without locking: the map is replaced, never modified.
type producers struct {
	client  pulsar.Client
	options func(topic string) pulsar.ProducerOptions

	// mu serializes creating and closing producers.
	mu      sync.Mutex
	byTopic atomic.Pointer[map[string]*producer]
}

// producer is a topic's producer whose batching delay the runtime keeps
// itself. pulsar-client-go flushes a producer's batch on a ticker of the
// delay whether the batch holds anything or not: at the default 10 ms,
// about 1.5 % of a core for every idle function instance on the test
// machine. So the client is given batchBackstop as its delay, and the
// runtime flushes the batch delay after the message that started it, with
// a timer that exists only while a batch waits. Not for a partitioned
// topic: the client flushes its partitions one after another, each after
// the broker's receipt for the one before, which would hold the last
// partition's batch back by as many round trips; each of its partitions
// keeps the client's ticker.
type producer struct {
	pulsar.Producer
	// delay is the batching delay the runtime keeps; 0 when the client
	// keeps it (batching off, or a delay of batchBackstop or more).
	delay time.Duration
	// armed is set while a flush is due.
	armed atomic.Bool
}

// batchBackstop is the batching delay the client is given when the runtime
// keeps a shorter one: its ticker then fires once a second. A variable for
// the test that proves the runtime's timer flushes.
var batchBackstop = time.Second

// flushWait bounds how long a timed flush waits for the broker's receipts:
// the batch is sent at once, and a flush still waiting (a broker away)
// holds only its own goroutine.
const flushWait = time.Second

// withRuntimeDelay returns opts with the client's batching delay replaced
// by batchBackstop, and the delay the runtime keeps instead (0: none).
func withRuntimeDelay(opts pulsar.ProducerOptions) (pulsar.ProducerOptions, time.Duration) {
	if opts.DisableBatching || opts.BatchingMaxPublishDelay <= 0 || opts.BatchingMaxPublishDelay >= batchBackstop {
		return opts, 0
	}
	delay := opts.BatchingMaxPublishDelay
	opts.BatchingMaxPublishDelay = batchBackstop
	return opts, delay
}

// SendAsync sends msg and arms the flush of the batch it joined, unless
// one is due already.
func (p *producer) SendAsync(ctx context.Context, msg *pulsar.ProducerMessage, cb func(pulsar.MessageID, *pulsar.ProducerMessage, error)) {
	p.Producer.SendAsync(ctx, msg, cb)
	if p.delay > 0 && p.armed.CompareAndSwap(false, true) {
		time.AfterFunc(p.delay, p.flushBatch)
	}
}

// flushBatch sends the batch the producer holds; a message sent from here
// on arms the next flush.
func (p *producer) flushBatch() {
	p.armed.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), flushWait)
	defer cancel()
	_ = p.FlushWithCtx(ctx) // a closed producer, or receipts late: the sends' callbacks say
}

func newProducers(client pulsar.Client, options func(topic string) pulsar.ProducerOptions) *producers {
	p := &producers{client: client, options: options}
	p.byTopic.Store(&map[string]*producer{})
	return p
}

// get returns the topic's producer, creating it if needed.
func (p *producers) get(topic string) (*producer, error) {
	if prod, ok := (*p.byTopic.Load())[topic]; ok {
		return prod, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	byTopic := *p.byTopic.Load()
	if prod, ok := byTopic[topic]; ok {
		return prod, nil
	}
	opts, delay := p.options(topic), time.Duration(0)
	if partitions, err := p.client.TopicPartitions(topic); err == nil && len(partitions) == 1 {
		opts, delay = withRuntimeDelay(opts)
	}
	created, err := p.client.CreateProducer(opts)
	if err != nil {
		return nil, fmt.Errorf("creating producer for %s: %w", topic, err)
	}
	prod := &producer{Producer: created, delay: delay}
	next := maps.Clone(byTopic)
	next[topic] = prod
	p.byTopic.Store(&next)
	return prod, nil
}

func (p *producers) sendAsync(ctx context.Context, topic string, msg *pulsar.ProducerMessage, done sendDone) error {
	prod, err := p.get(topic)
	if err != nil {
		return err
	}
	prod.SendAsync(ctx, msg, callback(done))
	return nil
}

// flush waits for every producer's pending sends.
func (p *producers) flush(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, prod := range *p.byTopic.Load() {
		_ = prod.FlushWithCtx(ctx)
	}
}

// close closes every producer.
func (p *producers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, prod := range *p.byTopic.Load() {
		prod.Close()
	}
	p.byTopic.Store(&map[string]*producer{})
}
