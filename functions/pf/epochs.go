package pf

import (
	"fmt"
	"strings"

	"github.com/foldline/foldline/functions/envelope"
)

// UserConfigLedgerEpochs maps each ledger topic a stage reads to the epoch
// of the topic's incarnation (package envelope, PropLedgerEpoch). foldline
// deploy sets it from the topic's properties, so that a ledger event
// published by any producer — not only foldline ingest, which stamps the
// epoch on each event — carries its epoch into every origin position, and
// the sink refuses, instead of skipping as applied, the operations of a
// topic whose ledger ids started again.
const UserConfigLedgerEpochs = "ledgerEpochs"

// ledgerEpochs is UserConfigLedgerEpochs parsed: full topic name → epoch.
type ledgerEpochs map[string]string

// parseLedgerEpochs reads UserConfigLedgerEpochs from a user config.
func parseLedgerEpochs(userConfig map[string]any) (ledgerEpochs, error) {
	v, ok := userConfig[UserConfigLedgerEpochs]
	if !ok {
		return nil, nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, fmt.Errorf("%w: user config key %q: want a map of topic to epoch, got %T", ErrBadConfig, UserConfigLedgerEpochs, v)
	}
	epochs := make(ledgerEpochs, len(m))
	for topic, e := range m {
		epoch, isString := e.(string)
		if !isString {
			return nil, fmt.Errorf("%w: user config key %q: topic %s: want an epoch string, got %T", ErrBadConfig, UserConfigLedgerEpochs, topic, e)
		}
		if err := envelope.CheckEpoch(epoch); err != nil {
			return nil, fmt.Errorf("%w: user config key %q: topic %s: %w", ErrBadConfig, UserConfigLedgerEpochs, topic, err)
		}
		if !strings.Contains(topic, "://") {
			// Messages name their topic in full; a short name would never match.
			return nil, fmt.Errorf("%w: user config key %q: topic %s: want a full name (persistent://tenant/namespace/topic)", ErrBadConfig, UserConfigLedgerEpochs, topic)
		}
		epochs[topic] = epoch
	}
	return epochs, nil
}

// of returns the epoch configured for a message's topic (a partition's
// topic gets its partitioned topic's epoch), or "".
func (e ledgerEpochs) of(topic string) string {
	if len(e) == 0 {
		return ""
	}
	if epoch, ok := e[topic]; ok {
		return epoch
	}
	if i := strings.LastIndex(topic, partitionSuffix); i > 0 {
		return e[topic[:i]]
	}
	return ""
}

// partitionSuffix precedes the partition number in a partition's topic name.
const partitionSuffix = "-partition-"
