// Package envelope holds the contracts that every Foldline message carries
// between the stages of a pipeline: the origin position of the ledger event
// that caused it, and the view operations that the last stage emits for the
// Cassandra sink.
//
// The origin position travels in message properties so that it survives any
// payload format; the runtime copies it from input to output unless a handler
// sets it explicitly.
//
// A view operation travels as JSON. DecodeViewOp (DecodeRowOp for the sink,
// without the key's map) and ViewOp.AppendJSON read and write it by hand,
// without reflection, yet exactly as encoding/json would; they hand
// encoding/json the inputs they do not handle themselves.
package envelope

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Message property names used by every stage.
const (
	// PropOrigin names the ledger event that caused a message: its
	// position, formatted by Position.String, a space, and the fully
	// qualified ledger topic (partition) it was published to, as
	// Origin.String writes it: "1046:49:3/0@e1 persistent://acme/ledger/events".
	// The position comes first because it never holds a space, so any topic
	// name may follow it. One property, not two: every property costs each
	// stage's client an entry to encode and decode, per message.
	PropOrigin = "foldline.origin"

	// PropOriginTopic and PropOriginPosition carry the origin as two
	// properties, the topic and the position: the only form readers built
	// before PropOrigin understand, and what a function writes until told
	// that its readers read PropOrigin (package pf, originProperty).
	// OriginFromProperties reads both forms; PropOrigin wins.
	PropOriginTopic    = "foldline.origin.topic"
	PropOriginPosition = "foldline.origin.pos"

	// PropLedgerEpoch is set by foldline ingest on every ledger event: the
	// epoch of the ledger topic it was published to (the topic property of
	// the same name, written once by foldline deploy when it creates the
	// topic). The first stage puts it into the origin position, and does
	// not copy the property onto its outputs (package pf).
	PropLedgerEpoch = "foldline.ledger.epoch"

	// Dead-letter properties, set on every message published to a
	// dead-letter topic.
	PropDeadLetterReason   = "foldline.dlq.reason"
	PropDeadLetterSource   = "foldline.dlq.source-topic"
	PropDeadLetterFunction = "foldline.dlq.function"
	PropDeadLetterAttempts = "foldline.dlq.attempts"
)

// ErrNoOrigin is returned when a message carries no origin position.
var ErrNoOrigin = errors.New("message carries no origin position")

// ErrBadPosition is matched by the error for a malformed position.
var ErrBadPosition = errors.New("malformed position")

// Position is a message's place in one topic partition: Pulsar's ledger id,
// entry id and index within a batch, refined by Path when one ledger event
// caused several outputs. Positions of the same partition and epoch are
// totally ordered; positions of different partitions are not comparable.
//
// Path tells apart the outputs one ledger event caused: every stage that
// emits more than one output for an input appends "/i", i being the output's
// index among them (a stage emitting one output appends nothing, so a chain of
// one-to-one stages keeps the ledger event's own position). Two outputs of one
// event therefore differ at the first stage where their ancestries part, and
// compare in the order they were emitted: a sink keyed by position applies
// both, and recognises each when it is delivered again.
//
// Epoch names the incarnation of the ledger topic (see PropLedgerEpoch):
// ledger ids restart when a topic is created anew under the same name, so
// positions of different epochs must never be compared. "" is unknown.
type Position struct {
	Ledger int64
	Entry  int64
	Batch  int32
	// Path is "" or "/i/j…", each index a canonical non-negative decimal.
	Path string
	// Epoch is "" or the ledger topic's epoch, without the "@".
	Epoch string
}

// MaxPathDepth bounds the stages a Path may record; ParsePosition refuses
// deeper paths, which no pipeline of sane length produces.
const MaxPathDepth = 64

// MaxEpochLength bounds an epoch's length in bytes.
const MaxEpochLength = 64

// String formats the position as "ledger:entry:batch[/i…][@epoch]".
func (p Position) String() string {
	var buf [64]byte // on the stack: the string is the only allocation
	return string(p.AppendTo(buf[:0]))
}

// AppendTo appends the position formatted as String does.
func (p Position) AppendTo(b []byte) []byte {
	b = strconv.AppendInt(b, p.Ledger, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, p.Entry, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(p.Batch), 10)
	b = append(b, p.Path...)
	if p.Epoch != "" {
		b = append(b, '@')
		b = append(b, p.Epoch...)
	}
	return b
}

// Event returns the position of the ledger event itself: p without Path and
// Epoch.
func (p Position) Event() Position {
	return Position{Ledger: p.Ledger, Entry: p.Entry, Batch: p.Batch}
}

// Child returns the position of output i of the n outputs that one input at
// p caused: p itself when n is 1, p with "/i" appended to its Path otherwise.
func (p Position) Child(i, n int) Position {
	if n <= 1 {
		return p
	}
	p.Path += "/" + strconv.Itoa(i)
	return p
}

// IsChild reports whether p is parent.Child(i, n), without building the
// child's path.
func (p Position) IsChild(parent Position, i, n int) bool {
	if n <= 1 {
		return p == parent
	}
	rest, ok := strings.CutPrefix(p.Path, parent.Path)
	if !ok || len(rest) < 2 || rest[0] != '/' {
		return false
	}
	var buf [20]byte
	p.Path = parent.Path
	return string(strconv.AppendInt(buf[:0], int64(i), 10)) == rest[1:] && p == parent
}

// Compare orders two positions of the same partition and epoch: -1, 0 or
// +1. Paths compare index by index; a path that is a prefix of another comes
// first. Epochs are not compared: check SameEpoch first.
func (p Position) Compare(q Position) int {
	switch {
	case p.Ledger != q.Ledger:
		return cmp64(p.Ledger, q.Ledger)
	case p.Entry != q.Entry:
		return cmp64(p.Entry, q.Entry)
	case p.Batch != q.Batch:
		return cmp64(int64(p.Batch), int64(q.Batch))
	default:
		return comparePaths(p.Path, q.Path)
	}
}

// SameEpoch reports whether p and q may be compared: their epochs are equal,
// or one of them is unknown.
func (p Position) SameEpoch(q Position) bool {
	return p.Epoch == "" || q.Epoch == "" || p.Epoch == q.Epoch
}

// comparePaths compares two well-formed paths index by index without
// allocating.
func comparePaths(a, b string) int {
	for a != "" || b != "" {
		switch {
		case a == "":
			return -1
		case b == "":
			return 1
		}
		var x, y string
		x, a = nextIndex(a)
		y, b = nextIndex(b)
		// Canonical decimals: the longer is the larger.
		if c := cmp64(int64(len(x)), int64(len(y))); c != 0 {
			return c
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// nextIndex splits "/i/rest" into "i" and "/rest".
func nextIndex(path string) (index, rest string) {
	path = path[1:]
	if i := strings.IndexByte(path, '/'); i >= 0 {
		return path[:i], path[i:]
	}
	return path, ""
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
	rest, epoch, hasEpoch := strings.Cut(s, "@")
	if hasEpoch {
		if err := checkEpoch(epoch); err != nil {
			return Position{}, fmt.Errorf("parsing position %q: %w", s, err)
		}
	}
	base, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		base, path = rest[:i], rest[i:]
		if err := checkPath(path); err != nil {
			return Position{}, fmt.Errorf("parsing position %q: %w", s, err)
		}
	}
	// strings.Cut, not Split: reading a well-formed position allocates
	// nothing, and every stage reads one per message.
	ledgerText, rest, ok1 := strings.Cut(base, ":")
	entryText, batchText, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || strings.IndexByte(batchText, ':') >= 0 {
		return Position{}, fmt.Errorf("parsing position %q: %w: want ledger:entry:batch[/index…][@epoch]", s, ErrBadPosition)
	}
	ledger, err := strconv.ParseInt(ledgerText, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parsing ledger id of position %q: %w", s, err)
	}
	entry, err := strconv.ParseInt(entryText, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parsing entry id of position %q: %w", s, err)
	}
	batch, err := strconv.ParseInt(batchText, 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("parsing batch index of position %q: %w", s, err)
	}
	return Position{Ledger: ledger, Entry: entry, Batch: int32(batch), Path: path, Epoch: epoch}, nil
}

// checkPath accepts "/i/j…" with canonical non-negative decimal indexes (no
// sign, no leading zero), at most MaxPathDepth of them: only then do equal
// outputs have equal text.
func checkPath(path string) error {
	depth := 0
	for rest := path; rest != ""; {
		if rest[0] != '/' {
			return fmt.Errorf("%w: path %q", ErrBadPosition, path)
		}
		var index string
		index, rest = nextIndex(rest)
		depth++
		if index == "" || len(index) > 10 || (len(index) > 1 && index[0] == '0') || depth > MaxPathDepth {
			return fmt.Errorf("%w: path %q", ErrBadPosition, path)
		}
		for i := 0; i < len(index); i++ {
			if index[i] < '0' || index[i] > '9' {
				return fmt.Errorf("%w: path %q", ErrBadPosition, path)
			}
		}
	}
	return nil
}

// checkEpoch accepts 1 to MaxEpochLength letters, digits, '-' or '_'.
func checkEpoch(epoch string) error {
	if epoch == "" || len(epoch) > MaxEpochLength {
		return fmt.Errorf("%w: epoch %q", ErrBadPosition, epoch)
	}
	for i := 0; i < len(epoch); i++ {
		c := epoch[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return fmt.Errorf("%w: epoch %q", ErrBadPosition, epoch)
		}
	}
	return nil
}

// CheckEpoch returns an error unless epoch is a valid ledger epoch.
func CheckEpoch(epoch string) error { return checkEpoch(epoch) }

// NewEpoch returns a fresh ledger epoch: the time and 32 random bits, so
// that two incarnations of a topic never share one and a person can tell
// which is newer.
func NewEpoch(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Origin names the ledger event that caused a message.
type Origin struct {
	Topic    string
	Position Position
}

// IsZero reports whether the origin is unset.
func (o Origin) IsZero() bool { return o.Topic == "" }

// String formats the origin as PropOrigin carries it: "position topic".
func (o Origin) String() string {
	var buf [128]byte // on the stack: the string is the only allocation
	return string(o.AppendTo(buf[:0]))
}

// AppendTo appends the origin formatted as String does.
func (o Origin) AppendTo(b []byte) []byte {
	b = o.Position.AppendTo(b)
	b = append(b, ' ')
	return append(b, o.Topic...)
}

// Is reports whether text is the origin formatted as String does, without
// formatting more than the position on the stack.
func (o Origin) Is(text string) bool {
	var buf [64]byte
	pos := o.Position.AppendTo(buf[:0])
	return len(text) == len(pos)+1+len(o.Topic) && text[:len(pos)] == string(pos) &&
		text[len(pos)] == ' ' && text[len(pos)+1:] == o.Topic
}

// ParseOrigin reads an origin written by Origin.String.
func ParseOrigin(s string) (Origin, error) {
	pos, topic, ok := strings.Cut(s, " ")
	if !ok || topic == "" {
		return Origin{}, fmt.Errorf("parsing origin %q: %w: want position, a space and the ledger topic", s, ErrBadPosition)
	}
	p, err := ParsePosition(pos)
	if err != nil {
		return Origin{}, fmt.Errorf("parsing origin %q: %w", s, err)
	}
	return Origin{Topic: topic, Position: p}, nil
}

// SetOn writes the origin into a message's properties (PropOrigin), and
// removes the properties that carried it before.
func (o Origin) SetOn(props map[string]string) {
	delete(props, PropOriginTopic)
	delete(props, PropOriginPosition)
	props[PropOrigin] = o.String()
}

// SetPairOn writes the origin into a message's properties as
// PropOriginTopic and PropOriginPosition, and removes PropOrigin.
func (o Origin) SetPairOn(props map[string]string) {
	delete(props, PropOrigin)
	props[PropOriginTopic] = o.Topic
	props[PropOriginPosition] = o.Position.String()
}

// Child returns the origin of output i of the n outputs an input with origin
// o caused (see Position.Child).
func (o Origin) Child(i, n int) Origin {
	o.Position = o.Position.Child(i, n)
	return o
}

// IsOriginProperty reports whether a property name carries an origin, in
// either form.
func IsOriginProperty(name string) bool {
	return name == PropOrigin || name == PropOriginTopic || name == PropOriginPosition
}

// HasOrigin reports whether a message's properties carry an origin, well
// formed or not: whether the message is derived rather than a ledger event.
func HasOrigin(props map[string]string) bool {
	if _, ok := props[PropOrigin]; ok {
		return true
	}
	_, hasTopic := props[PropOriginTopic]
	_, hasPos := props[PropOriginPosition]
	return hasTopic || hasPos
}

// OriginTopic returns the origin topic a message's properties carry,
// without reading the position; "" when they carry none.
func OriginTopic(props map[string]string) string {
	if v, ok := props[PropOrigin]; ok {
		_, topic, _ := strings.Cut(v, " ")
		return topic
	}
	return props[PropOriginTopic]
}

// OriginFromProperties reads the origin from a message's properties:
// PropOrigin or, when it is absent, PropOriginTopic and
// PropOriginPosition. It returns ErrNoOrigin when none of them is present,
// and a parse error when they are present but malformed.
func OriginFromProperties(props map[string]string) (Origin, error) {
	if v, ok := props[PropOrigin]; ok {
		o, err := ParseOrigin(v)
		if err != nil {
			return Origin{}, fmt.Errorf("reading origin: property %s: %w", PropOrigin, err)
		}
		return o, nil
	}
	topic, hasTopic := props[PropOriginTopic]
	pos, hasPos := props[PropOriginPosition]
	return LegacyOrigin(topic, pos, hasTopic, hasPos)
}

// LegacyOrigin reads an origin carried as PropOriginTopic and
// PropOriginPosition, with whether each is present, as
// OriginFromProperties does.
func LegacyOrigin(topic, pos string, hasTopic, hasPos bool) (Origin, error) {
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
