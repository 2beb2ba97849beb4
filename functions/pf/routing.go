package pf

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// UserConfigOutputRouting chooses the partition of a partitioned output
// topic each record goes to: "key" (the default: Pulsar's hash of the
// message key, or round robin without one) or "origin" (the partition of
// the ledger the record comes from, modulo the output's partitions).
//
// Origin routing is what keeps a partitioned DAG exact when a stage runs
// several instances: every event of ledger partition p, through every
// stage, lands in partition p of each intermediate topic, so the one
// instance a failover subscription makes active for that partition sees
// them in ledger order — also when the stage re-keys them. foldline deploy
// sets it on every function whose output another function reads; the
// last stage of a path keeps "key", so each view row (the message key) has
// one sink instance.
const UserConfigOutputRouting = "outputRouting"

// routing is UserConfigOutputRouting parsed.
type routing int

const (
	routeByKey routing = iota
	routeByOrigin
)

// parseRouting reads UserConfigOutputRouting from a user config.
func parseRouting(userConfig map[string]any) (routing, error) {
	i, err := userChoice(userConfig, UserConfigOutputRouting, "key", "origin")
	return routing(i), err
}

// routeByOriginPartition is a pulsar.ProducerOptions.MessageRouter: it
// sends a message to its origin's ledger partition modulo the topic's
// partitions. A message whose origin is no partition (its ledger is not
// partitioned) goes by a hash of its key, so each key still keeps one
// partition.
func routeByOriginPartition(msg *pulsar.ProducerMessage, meta pulsar.TopicMetadata) int {
	n := meta.NumPartitions()
	if n <= 1 {
		return 0
	}
	if p, ok := partitionOf(envelope.OriginTopic(msg.Properties)); ok {
		return int(uint32(p) % n)
	}
	h := fnv.New32a()
	h.Write([]byte(msg.Key))
	return int(h.Sum32() % n)
}

// partitionOf returns the partition index in a partition's topic name
// (persistent://t/n/topic-partition-3 → 3).
func partitionOf(topic string) (int, bool) {
	i := strings.LastIndex(topic, partitionSuffix)
	if i < 0 {
		return 0, false
	}
	p, err := strconv.Atoi(topic[i+len(partitionSuffix):])
	if err != nil || p < 0 {
		return 0, false
	}
	return p, true
}
