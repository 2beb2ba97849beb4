package pf

import (
	"errors"
	"fmt"
	"sync"
)

// errSendFailed marks the end of a session by a failed send; run then
// connects again.
var errSendFailed = errors.New("an output could not be sent")

// errSessionEnded is what a send gets once its session has ended: the
// message is not handed to the producer, and its input comes again.
var errSessionEnded = errors.New("not sent: the session ended after an earlier send failed")

// session is one connection's producers and the inputs taken while it
// lasts. The first failed send ends it, and keeps per-key order as follows.
//
// Outputs go out asynchronously, many inputs' sends in flight at once. When
// the send of input A fails, later inputs' messages to the same topic may
// already be in the producer. Negatively acknowledging A and carrying on,
// as the runtime once did, let those later messages, and every message
// sent meanwhile, reach the topic before A came again; A's operation then
// landed behind a later one of its key and a sink skipped it as already
// applied (its position being older than the row's). Retrying A in place
// cannot help either: the later messages are already on their way.
//
// So a failed send (other than one too large for any message, which
// dead-letters its input) ends the session instead: from then on nothing
// is handed to a producer, nothing is acknowledged and no input is taken;
// run closes the consumers, producers and client and connects again, and
// the subscription delivers again, in order, every input not acknowledged
// (the failed one and all after it). This holds because of what
// pulsar-client-go v0.19's producer does with a failed message (read in
// producer_partition.go):
//   - A failure before the message is queued (producer closed, context
//     ended) is reported by the callback before SendAsync returns, so the
//     session ends before the runtime sends anything later.
//   - Once queued, a message leaves the producer's pending queue only when
//     the broker confirms it, when its send timeout expires, or when the
//     producer fails everything pending (closed, fenced, topic terminated
//     or deleted, backlog quota exceeded). The send timeout is the one way
//     an earlier message fails while later ones stay pending and go out
//     after a reconnect, so the runtime disables it (SendTimeout -1): a
//     message waits while the broker is away and is resent in order when
//     the producer reconnects.
//   - Confirmations come in send order, so a later message confirmed
//     means every earlier one of that topic was confirmed too.
//
// What remains: a message of a later input that the producer still held in
// its batch (not yet pending) when a backlog quota failed the pending ones,
// and that it sends after the quota lifts, before the session closes the
// producer. Backlog quotas that refuse producers are off by default.
type session struct {
	out sender

	once  sync.Once
	ended chan struct{}
	cause error
}

func newSession(out sender) *session {
	return &session{out: out, ended: make(chan struct{})}
}

// end ends the session because of err; later calls change nothing.
func (s *session) end(err error) {
	s.once.Do(func() {
		s.cause = fmt.Errorf("%w: %w", errSendFailed, err)
		close(s.ended)
	})
}

// isEnded reports whether the session has ended.
func (s *session) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// err returns why the session ended, nil while it has not.
func (s *session) err() error {
	if !s.isEnded() {
		return nil
	}
	return s.cause
}
