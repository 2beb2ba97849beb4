package pf

import (
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// User config keys that bound the ledger events an instance processes: a
// replay as of a point in the ledger (foldline backfill --until) gives them
// to the stages that read the ledger.
const (
	// UserConfigUntilPublishTime (RFC 3339): ledger events published after
	// it are skipped.
	UserConfigUntilPublishTime = "untilPublishTime"
	// UserConfigUntilPosition (ledger:entry:batch, as envelope.Position
	// writes it): ledger events after it are skipped.
	UserConfigUntilPosition = "untilPosition"
	// UserConfigUntilEventTime (RFC 3339): ledger events whose own event
	// time is after it are skipped (an event without one: its publish
	// time). Unlike the other two it cuts no prefix of the ledger (event
	// times come in any order), so the whole ledger is read.
	UserConfigUntilEventTime = "untilEventTime"
)

// cutoff bounds the ledger events an instance processes. A ledger event is
// an input that carries no origin; inputs derived from the ledger are never
// skipped, since the stage that read the ledger already applied the cutoff.
type cutoff struct {
	publishTime time.Time
	position    *envelope.Position
	eventTime   time.Time
}

// parseCutoff reads the cutoff keys of a user config.
func parseCutoff(userConfig map[string]any) (cutoff, error) {
	var c cutoff
	var t, pos, et string
	if err := userString(userConfig, UserConfigUntilPublishTime, &t); err != nil {
		return c, err
	}
	if err := userString(userConfig, UserConfigUntilEventTime, &et); err != nil {
		return c, err
	}
	if et != "" {
		parsed, err := time.Parse(time.RFC3339Nano, et)
		if err != nil {
			return c, fmt.Errorf("%w: user config key %q: %w", ErrBadConfig, UserConfigUntilEventTime, err)
		}
		c.eventTime = parsed
	}
	if err := userString(userConfig, UserConfigUntilPosition, &pos); err != nil {
		return c, err
	}
	if t != "" {
		parsed, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return c, fmt.Errorf("%w: user config key %q: %w", ErrBadConfig, UserConfigUntilPublishTime, err)
		}
		c.publishTime = parsed
	}
	if pos != "" {
		p, err := envelope.ParsePosition(pos)
		if err != nil {
			return c, fmt.Errorf("%w: user config key %q: %w", ErrBadConfig, UserConfigUntilPosition, err)
		}
		c.position = &p
	}
	return c, nil
}

// skips reports whether msg, whose origin is origin, lies beyond the cutoff.
func (c cutoff) skips(msg pulsar.Message, origin envelope.Origin) bool {
	if c.publishTime.IsZero() && c.position == nil && c.eventTime.IsZero() {
		return false
	}
	if envelope.HasOrigin(msg.Properties()) {
		return false
	}
	if !c.eventTime.IsZero() {
		at := msg.EventTime()
		if at.IsZero() {
			at = msg.PublishTime()
		}
		if at.After(c.eventTime) {
			return true
		}
	}
	return c.endsLedger(msg, origin)
}

// endsLedger reports whether msg lies beyond a cutoff that ends a prefix of
// its topic (a publish time or a position): every later event of the topic
// lies beyond it too, so the rest of the topic need not be read.
func (c cutoff) endsLedger(msg pulsar.Message, origin envelope.Origin) bool {
	if !c.publishTime.IsZero() && msg.PublishTime().After(c.publishTime) {
		return true
	}
	return c.position != nil && origin.Position.Compare(*c.position) > 0
}

// seeker is a consumer that can move its subscription (pulsar.Consumer).
type seeker interface {
	SeekByTime(time.Time) error
}
