package localrun

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/pulsar-client-go/pulsar"
)

// ReadLedger yields the ledger topics' events, from the first to the last
// one the broker holds when reading starts (later ones are left), merged
// in publish order, in batches of up to size events.
func ReadLedger(ctx context.Context, client pulsar.Client, topics []string, size int) iter.Seq2[[]Message, error] {
	return func(yield func([]Message, error) bool) {
		type cursor struct {
			r    pulsar.Reader
			next *Message
		}
		var cursors []*cursor
		defer func() {
			for _, c := range cursors {
				c.r.Close()
			}
		}()
		advance := func(c *cursor) error {
			c.next = nil
			if !c.r.HasNext() {
				return nil
			}
			msg, err := c.r.Next(ctx)
			if err != nil {
				return fmt.Errorf("reading the ledger: %w", err)
			}
			m := FromPulsar(msg)
			c.next = &m
			return nil
		}
		for _, topic := range topics {
			r, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 5000})
			if err != nil {
				yield(nil, fmt.Errorf("reading ledger topic %s: %w", topic, err))
				return
			}
			c := &cursor{r: r}
			cursors = append(cursors, c)
			if err := advance(c); err != nil {
				yield(nil, err)
				return
			}
		}
		batch := make([]Message, 0, size)
		for {
			var first *cursor
			for _, c := range cursors {
				if c.next != nil && (first == nil || c.next.PublishTime.Before(first.next.PublishTime)) {
					first = c
				}
			}
			if first == nil {
				break
			}
			batch = append(batch, *first.next)
			if err := advance(first); err != nil {
				yield(nil, err)
				return
			}
			if len(batch) == size {
				if !yield(batch, nil) {
					return
				}
				batch = make([]Message, 0, size)
			}
		}
		if len(batch) > 0 {
			yield(batch, nil)
		}
	}
}

// FromPulsar is a ledger event as a local input.
func FromPulsar(msg pulsar.Message) Message {
	id := msg.ID()
	return Message{
		Topic: msg.Topic(), Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: int64(id.BatchIdx()),
		Key: msg.Key(), Payload: msg.Payload(), Properties: msg.Properties(),
		EventTime: msg.EventTime(), PublishTime: msg.PublishTime(),
	}
}
