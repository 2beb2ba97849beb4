package pf

import (
	"errors"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

type partitions uint32

func (p partitions) NumPartitions() uint32 { return uint32(p) }

func TestParseRouting(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want routing
		bad  bool
	}{
		{nil, routeByKey, false},
		{"key", routeByKey, false},
		{"origin", routeByOrigin, false},
		{"Origin", routeByOrigin, false},
		{"round-robin", 0, true},
		{7, 0, true},
	} {
		uc := map[string]any{}
		if tc.in != nil {
			uc[UserConfigOutputRouting] = tc.in
		}
		got, err := parseRouting(uc)
		if tc.bad {
			if !errors.Is(err, ErrBadConfig) {
				t.Errorf("%v: want a bad-config error, got %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestRouteByOriginPartition(t *testing.T) {
	msg := func(origin, key string) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Key: key, Properties: map[string]string{envelope.PropOrigin: "1:2:3 " + origin}}
	}
	// A message derived before the origin was one property routes alike.
	legacy := &pulsar.ProducerMessage{Key: "u1", Properties: map[string]string{envelope.PropOriginTopic: "persistent://t/ledger/events-partition-3"}}
	if got := routeByOriginPartition(legacy, partitions(4)); got != 3 {
		t.Errorf("a legacy origin in partition 3 went to partition %d", got)
	}
	for _, tc := range []struct {
		origin string
		n      partitions
		want   int
	}{
		{"persistent://t/ledger/events-partition-0", 4, 0},
		{"persistent://t/ledger/events-partition-3", 4, 3},
		{"persistent://t/ledger/events-partition-6", 4, 2},
		{"persistent://t/ledger/events-partition-3", 1, 0},
	} {
		// Keys differ: the origin decides, not the key.
		for _, key := range []string{"u1", "u2", "sku-9"} {
			if got := routeByOriginPartition(msg(tc.origin, key), tc.n); got != tc.want {
				t.Errorf("%s over %d partitions, key %s: got %d, want %d", tc.origin, tc.n, key, got, tc.want)
			}
		}
	}
	// Without a partitioned origin, one key keeps one partition.
	first := routeByOriginPartition(msg("persistent://t/ledger/events", "u1"), partitions(4))
	for range 10 {
		if got := routeByOriginPartition(msg("persistent://t/ledger/events", "u1"), partitions(4)); got != first || got < 0 || got > 3 {
			t.Fatalf("key u1 went to partition %d, then %d", first, got)
		}
	}
	for _, bad := range []string{"persistent://t/n/x-partition-", "persistent://t/n/x-partition--1", "persistent://t/n/x-partition-a"} {
		if _, ok := partitionOf(bad); ok {
			t.Errorf("partitionOf(%q) found a partition", bad)
		}
	}
}
