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
// creates the topic (or, for a topic created before epochs existed, the
// first time either finds it without one), and never changed. Deploy also
// gives it to the stages that read the topic (the runtime's user config
// ledgerEpochs), so that an event some other producer published, without
// the property, still carries its epoch into every origin position.
package ledgerepoch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/functions/envelope"
)

// New returns a fresh epoch: the creation time and 32 random bits, so that
// two incarnations never share one and a person can tell which is newer.
func New(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

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
// has none.
func Ensure(ctx context.Context, topics admin.Topics, topic utils.TopicName) (string, error) {
	epoch, ok, err := Read(ctx, topics, topic)
	if err != nil || ok {
		return epoch, err
	}
	epoch = New(time.Now())
	return epoch, Write(ctx, topics, topic, epoch)
}
