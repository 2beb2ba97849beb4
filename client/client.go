// Package client is what applications publish events to a tenant's ledger
// with, live, with the guarantee foldline ingest gives files: each event
// counts once in every view, however many times it is published.
//
// The guarantee comes from the event's id, not from the connection: the
// tenant names its events' id field (its manifest's eventId), and the
// ledger's only reader, the dedup stage (functions/dedup), passes an event
// on the first time its id comes under its key and never again. So a
// publish that failed, or whose answer was lost, is retried by publishing
// the same event again — from the same process, or after the application
// restarted, from its own record of what it may not have published (an
// outbox, a log it replays) — whichever producer, however long after.
// Broker deduplication, which forgets a producer after hours of silence,
// is not relied on.
//
// A Producer refuses an event without an id (ErrNoID): it would pass the
// dedup stage as often as it was published. Each event's message key is its
// key field (the entity key, by which the ledger is partitioned and its
// state kept), its event time its time field.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/dedup"
	"github.com/foldline/foldline/functions/envelope/jsonwire"
)

// ErrNoID is matched by the error of publishing an event whose id field is
// missing, or neither a non-empty string nor a number.
var ErrNoID = errors.New("event has no id")

// ErrNotJSON is matched by the error of publishing something that is not a
// JSON object.
var ErrNotJSON = errors.New("event is not a JSON object")

// Options configure a Producer. Zero fields take the defaults shown.
type Options struct {
	// Client is the Pulsar client to publish with, the application's:
	// connected as the tenant, or as a role that may produce to its ledger.
	// Required.
	Client pulsar.Client
	// Tenant owns the ledger; Topic defaults to its
	// persistent://TENANT/ledger/events. One of them is required.
	Tenant, Topic string
	// IDField is the tenant's eventId (default "id"); KeyField is the
	// field whose value is the message key (default "user"); TimeField the
	// field whose RFC 3339 value is the event time (default "time"; an
	// event without it gets none).
	IDField, KeyField, TimeField string
	// Compression of the ledger's batches: none, lz4 (default), zlib,
	// zstd. The ledger is kept forever.
	Compression pulsar.CompressionType
	// BatchDelay is the longest an event waits for others to share its
	// batch (default 10ms): a live producer's events go out as they come.
	BatchDelay time.Duration
	// MaxPending bounds the events in flight (default 10000): PublishAsync
	// blocks beyond it.
	MaxPending int
}

// DefaultTopic is the ledger topic of a tenant when none is given.
func DefaultTopic(tenant string) string {
	return "persistent://" + tenant + "/ledger/events"
}

func (o Options) withDefaults() (Options, error) {
	if o.Client == nil {
		return o, errors.New("client: Options.Client is required")
	}
	if o.Topic == "" {
		if o.Tenant == "" {
			return o, errors.New("client: Options.Tenant or Options.Topic is required")
		}
		o.Topic = DefaultTopic(o.Tenant)
	}
	if o.IDField == "" {
		o.IDField = "id"
	}
	if o.KeyField == "" {
		o.KeyField = "user"
	}
	if o.TimeField == "" {
		o.TimeField = "time"
	}
	if o.Compression == pulsar.NoCompression {
		o.Compression = pulsar.LZ4
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = 10 * time.Millisecond
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10_000
	}
	return o, nil
}

// Producer publishes events to one ledger. It is safe for concurrent use;
// events published from one goroutine reach the ledger in the order
// published.
type Producer struct {
	opts     Options
	producer pulsar.Producer
}

// New connects a producer to the ledger.
func New(opts Options) (*Producer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := opts.Client.CreateProducer(pulsar.ProducerOptions{
		Topic: opts.Topic,
		// No send timeout: an event waits while the broker is away and
		// goes out, in order, when the producer reconnects.
		SendTimeout:             -1,
		CompressionType:         opts.Compression,
		BatchingMaxPublishDelay: opts.BatchDelay,
		MaxPendingMessages:      opts.MaxPending,
	})
	if err != nil {
		return nil, fmt.Errorf("creating a producer on %s: %w", opts.Topic, err)
	}
	return &Producer{opts: opts, producer: p}, nil
}

// Message returns the ledger message of event: the event as it is, keyed
// by its key field, at its time. It refuses an event without an id
// (ErrNoID) or that is not a JSON object (ErrNotJSON).
func (p *Producer) Message(event []byte) (*pulsar.ProducerMessage, error) {
	f, err := Fields(event, p.opts.IDField, p.opts.KeyField, p.opts.TimeField)
	if err != nil {
		return nil, err
	}
	if f.ID == "" {
		return nil, fmt.Errorf("%w: field %q", ErrNoID, p.opts.IDField)
	}
	return &pulsar.ProducerMessage{Payload: event, Key: f.Key, EventTime: f.Time}, nil
}

// Publish publishes event and returns once the ledger holds it. On an
// error, publishing the same event again is safe: see the package
// documentation.
func (p *Producer) Publish(ctx context.Context, event []byte) error {
	msg, err := p.Message(event)
	if err != nil {
		return err
	}
	if _, err := p.producer.Send(ctx, msg); err != nil {
		return fmt.Errorf("publishing to %s: %w", p.opts.Topic, err)
	}
	return nil
}

// PublishAsync publishes event and calls done (from another goroutine)
// once the ledger holds it, or with the error; an event it refuses is
// reported to done at once. event must not change until done is called.
func (p *Producer) PublishAsync(ctx context.Context, event []byte, done func(error)) {
	msg, err := p.Message(event)
	if err != nil {
		done(err)
		return
	}
	p.producer.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if err != nil {
			err = fmt.Errorf("publishing to %s: %w", p.opts.Topic, err)
		}
		done(err)
	})
}

// Flush waits until every event published so far is in the ledger.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.producer.FlushWithCtx(ctx); err != nil {
		return fmt.Errorf("flushing %s: %w", p.opts.Topic, err)
	}
	return nil
}

// Close flushes and closes the producer (not the Pulsar client).
func (p *Producer) Close() { p.producer.Close() }

// EventFields are what the ledger needs of an event.
type EventFields struct {
	// ID is the id field's text: a string's value, a number as written;
	// "" when it is missing or of another type.
	ID string
	// Key is the key field's string value, "" otherwise.
	Key string
	// Time is the time field's RFC 3339 value, zero otherwise.
	Time time.Time
}

// Fields reads an event's id, key and time fields. An event that is not a
// JSON object is ErrNotJSON.
func Fields(event []byte, idField, keyField, timeField string) (EventFields, error) {
	var members [3]json.RawMessage
	if !jsonwire.Members(event, []string{idField, keyField, timeField}, members[:]) {
		// What the fast reader leaves to encoding/json, which decides.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(event, &fields); err != nil || fields == nil {
			return EventFields{}, ErrNotJSON
		}
		members = [3]json.RawMessage{fields[idField], fields[keyField], fields[timeField]}
	}
	var f EventFields
	f.ID = dedup.IDOf(members[0])
	if s, ok := jsonwire.PlainString(members[1]); ok {
		f.Key = s
	} else {
		_ = json.Unmarshal(members[1], &f.Key) // not a string: no key
	}
	if t, ok := jsonwire.Time(bytes.TrimSpace(members[2])); ok {
		f.Time = t
	} else {
		var ts string
		if json.Unmarshal(members[2], &ts) == nil {
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				f.Time = t
			}
		}
	}
	return f, nil
}
