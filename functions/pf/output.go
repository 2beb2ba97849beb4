package pf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// sender sends messages asynchronously, keeping the order of the sends of
// one topic; done is called exactly once per message, from any goroutine.
type sender interface {
	sendAsync(ctx context.Context, topic string, msg *pulsar.ProducerMessage, done func(error))
}

// acker acknowledges input messages; pulsar.Consumer is one.
type acker interface {
	Ack(pulsar.Message) error
	Nack(pulsar.Message)
}

// originOf returns the origin position an input message carries, or the
// message's own topic and position when it carries none (a ledger event).
func originOf(msg pulsar.Message) (envelope.Origin, error) {
	o, err := envelope.OriginFromProperties(msg.Properties())
	if errors.Is(err, envelope.ErrNoOrigin) {
		id := msg.ID()
		return envelope.Origin{
			Topic:    msg.Topic(),
			Position: envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()},
		}, nil
	}
	return o, err
}

// outputMessage builds the message for rec, filling what rec leaves unset
// from the input: key, properties (rec's are laid over a copy of the input's),
// origin and event time.
func outputMessage(in pulsar.Message, origin envelope.Origin, rec Record) *pulsar.ProducerMessage {
	inProps := in.Properties()
	props := make(map[string]string, len(inProps)+len(rec.Properties)+2)
	for k, v := range inProps {
		props[k] = v
	}
	if !origin.IsZero() {
		origin.SetOn(props)
	}
	for k, v := range rec.Properties {
		props[k] = v
	}
	pm := &pulsar.ProducerMessage{
		Payload:    rec.Payload,
		Key:        rec.Key,
		Properties: props,
		EventTime:  rec.EventTime,
	}
	if pm.Key == "" {
		pm.Key = in.Key()
		pm.OrderingKey = in.OrderingKey()
	}
	if pm.EventTime.IsZero() {
		pm.EventTime = in.EventTime()
	}
	return pm
}

// deadLetter builds the dead-letter message for an input that failed.
func deadLetter(in pulsar.Message, origin envelope.Origin, fqfn string, attempts int, reason error) *pulsar.ProducerMessage {
	return outputMessage(in, origin, Record{
		Payload: in.Payload(),
		Properties: map[string]string{
			envelope.PropDeadLetterReason:   reason.Error(),
			envelope.PropDeadLetterSource:   in.Topic(),
			envelope.PropDeadLetterFunction: fqfn,
			envelope.PropDeadLetterAttempts: strconv.Itoa(attempts),
		},
	})
}

// completion calls finish once all of n sends are done, with the first error
// among them (nil when all succeeded).
type completion struct {
	mu        sync.Mutex
	remaining int
	err       error
	finish    func(error)
}

func newCompletion(n int, finish func(error)) *completion {
	return &completion{remaining: n, finish: finish}
}

func (c *completion) done(err error) {
	c.mu.Lock()
	if err != nil && c.err == nil {
		c.err = err
	}
	c.remaining--
	last, first := c.remaining == 0, c.err
	c.mu.Unlock()
	if last {
		c.finish(first)
	}
}

// producers holds one producer per topic, created on first use.
type producers struct {
	client  pulsar.Client
	options func(topic string) pulsar.ProducerOptions

	mu      sync.Mutex
	byTopic map[string]pulsar.Producer
}

func newProducers(client pulsar.Client, options func(topic string) pulsar.ProducerOptions) *producers {
	return &producers{client: client, options: options, byTopic: map[string]pulsar.Producer{}}
}

// get returns the topic's producer, creating it if needed.
func (p *producers) get(topic string) (pulsar.Producer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prod, ok := p.byTopic[topic]; ok {
		return prod, nil
	}
	prod, err := p.client.CreateProducer(p.options(topic))
	if err != nil {
		return nil, fmt.Errorf("creating producer for %s: %w", topic, err)
	}
	p.byTopic[topic] = prod
	return prod, nil
}

func (p *producers) sendAsync(ctx context.Context, topic string, msg *pulsar.ProducerMessage, done func(error)) {
	prod, err := p.get(topic)
	if err != nil {
		done(err)
		return
	}
	prod.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if err != nil {
			err = fmt.Errorf("sending to %s: %w", topic, err)
		}
		done(err)
	})
}

// flush waits for every producer's pending sends.
func (p *producers) flush(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, prod := range p.byTopic {
		_ = prod.FlushWithCtx(ctx)
	}
}

// close closes every producer.
func (p *producers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for topic, prod := range p.byTopic {
		prod.Close()
		delete(p.byTopic, topic)
	}
}
