// Package envelope holds the contracts that every Foldline message carries
// between the stages of a pipeline: the origin position of the ledger event
// that caused it, and the view operations that the last stage emits for the
// Cassandra sink.
//
// The origin position travels in message properties so that it survives any
// payload format; the runtime copies it from input to output unless a handler
// sets it explicitly.
//
// A view operation travels as JSON. DecodeViewOp and ViewOp.AppendJSON read
// and write it by hand, without reflection, yet exactly as encoding/json
// would; they hand encoding/json the inputs they do not handle themselves.
package envelope

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Message property names used by every stage.
const (
	// PropOriginTopic is the fully qualified ledger topic (partition) the
	// causing event was published to.
	PropOriginTopic = "foldline.origin.topic"
	// PropOriginPosition is the causing event's position in that topic,
	// formatted by Position.String.
	PropOriginPosition = "foldline.origin.pos"

	// Dead-letter properties, set on every message published to a
	// dead-letter topic.
	PropDeadLetterReason   = "foldline.dlq.reason"
	PropDeadLetterSource   = "foldline.dlq.source-topic"
	PropDeadLetterFunction = "foldline.dlq.function"
	PropDeadLetterAttempts = "foldline.dlq.attempts"
)

// ErrNoOrigin is returned when a message carries no origin position.
var ErrNoOrigin = errors.New("message carries no origin position")

// Position is a message's place in one topic partition: Pulsar's ledger id,
// entry id and index within a batch. Positions of the same partition are
// totally ordered; positions of different partitions are not comparable.
type Position struct {
	Ledger int64
	Entry  int64
	Batch  int32
}

// String formats the position as "ledger:entry:batch".
func (p Position) String() string {
	return fmt.Sprintf("%d:%d:%d", p.Ledger, p.Entry, p.Batch)
}

// Compare orders two positions of the same partition: -1, 0 or +1.
func (p Position) Compare(q Position) int {
	switch {
	case p.Ledger != q.Ledger:
		return cmp64(p.Ledger, q.Ledger)
	case p.Entry != q.Entry:
		return cmp64(p.Entry, q.Entry)
	default:
		return cmp64(int64(p.Batch), int64(q.Batch))
	}
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ParsePosition reads a position written by Position.String.
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Position{}, fmt.Errorf("parsing position %q: want ledger:entry:batch", s)
	}
	ledger, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parsing ledger id of position %q: %w", s, err)
	}
	entry, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parsing entry id of position %q: %w", s, err)
	}
	batch, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("parsing batch index of position %q: %w", s, err)
	}
	return Position{Ledger: ledger, Entry: entry, Batch: int32(batch)}, nil
}

// Origin names the ledger event that caused a message.
type Origin struct {
	Topic    string
	Position Position
}

// IsZero reports whether the origin is unset.
func (o Origin) IsZero() bool { return o.Topic == "" }

// SetOn writes the origin into a message's properties.
func (o Origin) SetOn(props map[string]string) {
	props[PropOriginTopic] = o.Topic
	props[PropOriginPosition] = o.Position.String()
}

// OriginFromProperties reads the origin from a message's properties. It
// returns ErrNoOrigin when neither property is present, and a parse error when
// they are present but malformed.
func OriginFromProperties(props map[string]string) (Origin, error) {
	topic, hasTopic := props[PropOriginTopic]
	pos, hasPos := props[PropOriginPosition]
	if !hasTopic && !hasPos {
		return Origin{}, ErrNoOrigin
	}
	if !hasTopic || topic == "" {
		return Origin{}, fmt.Errorf("reading origin: property %s is missing", PropOriginTopic)
	}
	p, err := ParsePosition(pos)
	if err != nil {
		return Origin{}, fmt.Errorf("reading origin: property %s: %w", PropOriginPosition, err)
	}
	return Origin{Topic: topic, Position: p}, nil
}
