package pf

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
)

// User config keys of the runtime's consumer and producer settings (see
// ClientSettings).
const (
	UserConfigReceiverQueueSize         = "receiverQueueSize"
	UserConfigMaxPendingMessages        = "maxPendingMessages"
	UserConfigCompression               = "compression"
	UserConfigBatchingMaxMessages       = "batchingMaxMessages"
	UserConfigBatchingMaxSize           = "batchingMaxSize"
	UserConfigBatchingMaxPublishDelayMs = "batchingMaxPublishDelayMs"
)

// Defaults of ClientSettings: a throughput-tuned consume→produce loop. On
// two cores a receiver queue of 5000 and 10 000 pending sends keep the
// broker busy where the client's defaults (1000 and 1000 per partition)
// leave it waiting; compression costs CPU on both ends for small messages
// and saves little on a local network.
const (
	DefaultReceiverQueueSize   = 5000
	DefaultMaxPendingMessages  = 10_000
	DefaultBatchingMaxMessages = 1000 // pulsar-client-go's own default
	// DefaultBatchingMaxSize is eight times pulsar-client-go's 128 KiB:
	// an output carries its input's origin (about 100 bytes of
	// properties), so 128 KiB closed the identity function's batches of
	// 100-byte events at about 460 messages, and the broker spends CPU per
	// batch. At 1 MiB they are closed by count or time, as the plain
	// loop's are.
	DefaultBatchingMaxSize           = 1 << 20
	DefaultBatchingMaxPublishDelayMs = 10
)

// compressionNames are the values of UserConfigCompression.
var compressionNames = map[string]pulsar.CompressionType{
	"none":   pulsar.NoCompression,
	"lz4":    pulsar.LZ4,
	"zlib":   pulsar.ZLib,
	"zstd":   pulsar.ZSTD,
	"snappy": pulsar.SNAPPY,
}

// ParseCompression reads a compression's name (none, lz4, zlib, zstd or
// snappy, in any case), as the user config key compression and foldline
// ingest --compression take it.
func ParseCompression(name string) (pulsar.CompressionType, error) {
	if t, known := compressionNames[strings.ToLower(name)]; known {
		return t, nil
	}
	return 0, errors.New("want none, lz4, zlib, zstd or snappy")
}

// ClientSettings are the settings of the consumers and producers the
// runtime creates, taken from the function's user config. Each field names
// its key and default.
type ClientSettings struct {
	// ReceiverQueueSize (receiverQueueSize, default 5000) is each
	// consumer's receiver queue; the channel the consumers fill holds as
	// many, at most 1000. An input's own receiver queue size from the
	// function details (--input-specs) wins for that input.
	ReceiverQueueSize int
	// MaxPendingMessages (maxPendingMessages, default 10 000) bounds each
	// producer's sends awaiting confirmation. When the key is absent, a
	// maxPendingMessages from the function details (--producer-config) is
	// taken.
	MaxPendingMessages int
	// Compression (compression: none, lz4, zlib, zstd or snappy; default
	// none) compresses the producers' batches. When the key is absent, the
	// compressionType of the function details (--producer-config) is taken
	// unless it is LZ4: the worker fills in LZ4 (the proto's zero value)
	// when none was given, so an LZ4 there cannot be told from no choice at
	// all; set the key to lz4 to get it.
	Compression pulsar.CompressionType
	// BatchingMaxMessages (batchingMaxMessages, default 1000) and
	// BatchingMaxSize (batchingMaxSize, bytes, default 1 MiB) close a
	// producer's batch; so does BatchingMaxPublishDelay
	// (batchingMaxPublishDelayMs, default 10 ms) after the batch's first
	// message.
	BatchingMaxMessages     int
	BatchingMaxSize         int
	BatchingMaxPublishDelay time.Duration
}

// DefaultClientSettings returns the settings of a user config that sets
// none of the keys.
func DefaultClientSettings() ClientSettings {
	return ClientSettings{
		ReceiverQueueSize:       DefaultReceiverQueueSize,
		MaxPendingMessages:      DefaultMaxPendingMessages,
		Compression:             pulsar.NoCompression,
		BatchingMaxMessages:     DefaultBatchingMaxMessages,
		BatchingMaxSize:         DefaultBatchingMaxSize,
		BatchingMaxPublishDelay: DefaultBatchingMaxPublishDelayMs * time.Millisecond,
	}
}

// ParseClientSettings reads the client settings from a user config, as the
// runtime does (without the function details' producer spec). Every bad
// value is reported, each as a *UserConfigError naming its key, joined.
// Numbers may be JSON numbers (the worker passes 3 as 3.0), Go integers (a
// YAML manifest) or strings of digits.
func ParseClientSettings(userConfig map[string]any) (ClientSettings, error) {
	return clientSettings(userConfig, nil)
}

// clientSettings reads the settings from a user config over the defaults
// and what the producer spec of the function details set.
func clientSettings(uc map[string]any, ps *instancepb.ProducerSpec) (ClientSettings, error) {
	s := DefaultClientSettings()
	if n := int(ps.GetMaxPendingMessages()); n > 0 {
		s.MaxPendingMessages = n
	}
	if t := ps.GetCompressionType(); t != instancepb.CompressionType_LZ4 {
		s.Compression = compressionOf(t)
	}
	delayMs := DefaultBatchingMaxPublishDelayMs
	var problems []error
	for _, n := range []struct {
		key string
		dst *int
	}{
		{UserConfigReceiverQueueSize, &s.ReceiverQueueSize},
		{UserConfigMaxPendingMessages, &s.MaxPendingMessages},
		{UserConfigBatchingMaxMessages, &s.BatchingMaxMessages},
		{UserConfigBatchingMaxSize, &s.BatchingMaxSize},
		{UserConfigBatchingMaxPublishDelayMs, &delayMs},
	} {
		if err := userCount(uc, n.key, n.dst); err != nil {
			problems = append(problems, err)
		} else if *n.dst < 1 {
			problems = append(problems, &UserConfigError{Key: n.key, Reason: fmt.Sprintf("want a whole number ≥ 1, got %d", *n.dst)})
		}
	}
	s.BatchingMaxPublishDelay = time.Duration(delayMs) * time.Millisecond
	if v, ok := uc[UserConfigCompression]; ok {
		name, _ := v.(string)
		if t, err := ParseCompression(name); err == nil {
			s.Compression = t
		} else {
			problems = append(problems, &UserConfigError{Key: UserConfigCompression, Reason: fmt.Sprintf("%v: %v", v, err)})
		}
	}
	return s, errors.Join(problems...)
}

// compressionOf maps the function details' compression type to the
// client's.
func compressionOf(t instancepb.CompressionType) pulsar.CompressionType {
	switch t {
	case instancepb.CompressionType_NONE:
		return pulsar.NoCompression
	case instancepb.CompressionType_ZLIB:
		return pulsar.ZLib
	case instancepb.CompressionType_ZSTD:
		return pulsar.ZSTD
	case instancepb.CompressionType_SNAPPY:
		return pulsar.SNAPPY
	}
	return pulsar.LZ4
}

// applyProducer sets the producer options the settings cover.
func (s *ClientSettings) applyProducer(opts *pulsar.ProducerOptions) {
	opts.CompressionType = s.Compression
	opts.MaxPendingMessages = s.MaxPendingMessages
	opts.BatchingMaxMessages = uint(s.BatchingMaxMessages)
	opts.BatchingMaxSize = uint(s.BatchingMaxSize)
	opts.BatchingMaxPublishDelay = s.BatchingMaxPublishDelay
}

// applyClientSettings reads the client settings and gives every input
// without a receiver queue size of its own the configured one.
func (c *instanceConf) applyClientSettings(ps *instancepb.ProducerSpec) error {
	s, err := clientSettings(c.UserConfig, ps)
	if err != nil {
		return err
	}
	c.Client = s
	for i := range c.Inputs {
		if c.Inputs[i].ReceiverQueueSize == 0 {
			c.Inputs[i].ReceiverQueueSize = s.ReceiverQueueSize
		}
	}
	return nil
}

// maxHandoff caps the channel the consumers fill. Each consumer already
// holds its receiver queue, and takes more from the broker as the channel
// takes from it, so the channel adds to the prefetch without adding to the
// rate: a buffered input holds about 2.5 KB of the heap (a heap profile of
// the identity function on 100-byte messages), and a channel as large as a
// 5000 queue made the instance collect garbage all the time under its
// memory limit. 1000 (the channel the runtime had before) leaves
// FunctionContext.Pending a backlog to report.
const maxHandoff = 1000

// messageQueue is the capacity of the channel the consumers fill: the
// largest of their receiver queues, at most maxHandoff.
func (c *instanceConf) messageQueue() int {
	n := c.Client.ReceiverQueueSize
	for _, in := range c.Inputs {
		n = max(n, in.ReceiverQueueSize)
	}
	return min(n, maxHandoff)
}

// UserConfigError is a bad value of a user config key. It wraps
// ErrBadConfig.
type UserConfigError struct {
	Key    string
	Reason string
}

func (e *UserConfigError) Error() string {
	return fmt.Sprintf("%s: user config key %q: %s", ErrBadConfig, e.Key, e.Reason)
}

func (e *UserConfigError) Unwrap() error { return ErrBadConfig }
