// Package ledgerepoch gives each ledger topic an epoch: a name for this
// incarnation of the topic, kept in the topic's properties under
// envelope.PropLedgerEpoch. Pulsar's ledger ids start again when a topic is
// created anew under the same name (a new cluster, wiped metadata), so
// positions alone cannot tell a redelivered event from a new one there;
// foldline ingest stamps the epoch on every event, the first stage carries
// it into every origin position, and the sink refuses an operation whose
// epoch differs from the one its row recorded, instead of skipping it as
// applied.
//
// The epoch is written once, when foldline deploy or foldline ingest
// creates the topic (or, for a topic created otherwise — by a producer, or
// by a consumer reconnecting after the topic was deleted — the first time
// either, or a function's runtime, finds it without one), and never
// changed. An event some other producer published, without the property,
// takes the epoch from the topic itself: the runtime of the stage that
// reads it reads the topic's property (pf's adminServiceURL), once per
// ledger, so that a topic created anew since the last deploy gives its
// events its own epoch, never the one deploy configured (which stays the
// runtime's fallback when it cannot reach the admin API's URL at all).
package ledgerepoch

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/functions/envelope"
)

// New returns a fresh epoch: the creation time and 32 random bits, so that
// two incarnations never share one and a person can tell which is newer.
func New(now time.Time) string { return envelope.NewEpoch(now) }

// Properties returns the topic properties that create a ledger topic with
// a fresh epoch.
func Properties(now time.Time) map[string]string {
	return map[string]string{envelope.PropLedgerEpoch: New(now)}
}

// Read returns the epoch of an existing ledger topic; ok is false when the
// topic has none yet.
func Read(ctx context.Context, topics admin.Topics, topic utils.TopicName) (epoch string, ok bool, err error) {
	props, err := topics.GetPropertiesWithContext(ctx, topic)
	if err != nil {
		return "", false, fmt.Errorf("reading properties of ledger topic %s: %w", topic.String(), err)
	}
	epoch, ok = props[envelope.PropLedgerEpoch]
	if !ok {
		return "", false, nil
	}
	if err := envelope.CheckEpoch(epoch); err != nil {
		return "", false, fmt.Errorf("reading the epoch of ledger topic %s: %w", topic.String(), err)
	}
	return epoch, true, nil
}

// Write gives a ledger topic that has none the epoch epoch.
func Write(ctx context.Context, topics admin.Topics, topic utils.TopicName, epoch string) error {
	if err := topics.UpdatePropertiesWithContext(ctx, topic, map[string]string{envelope.PropLedgerEpoch: epoch}); err != nil {
		return fmt.Errorf("giving ledger topic %s an epoch: %w", topic.String(), err)
	}
	return nil
}

// Ensure returns the epoch of an existing ledger topic, giving it one if it
// has none. The topic's property is read back after the write and that is
// what it returns: another writer that found the topic without an epoch at
// the same moment (a function's runtime, another ingest) may have written
// its own, and the last write is the topic's.
func Ensure(ctx context.Context, topics admin.Topics, topic utils.TopicName) (string, error) {
	epoch, ok, err := Read(ctx, topics, topic)
	if err != nil || ok {
		return epoch, err
	}
	if err := Write(ctx, topics, topic, New(time.Now())); err != nil {
		return "", err
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(settle):
	}
	epoch, ok, err = Read(ctx, topics, topic)
	if err == nil && !ok {
		err = fmt.Errorf("reading back the epoch given to ledger topic %s: it has none", topic.String())
	}
	return epoch, err
}

// settle is how long Ensure waits between writing an epoch and reading it
// back, as the functions' runtime does (pf's settleEpoch).
const settle = time.Second
