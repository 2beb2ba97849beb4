// Package cqlsession opens and closes gocql sessions so that neither ever
// blocks its caller forever.
//
// gocql v1.7.0 can: stopping a session's refresh debouncer sends on a
// channel that its flusher goroutine no longer reads once it has seen the
// stop flag (upstream CASSGO-41, fixed in the driver's v2 module). Both
// Session.Close and a CreateSession whose set-up failed (it closes what it
// started) stop the debouncer, so under load, when Cassandra answers
// connection start-ups too late and set-ups fail, a CreateSession can
// block for good. A sink or stateful function waiting on it then holds its
// messages, unacknowledged, and does nothing. Create gives up on such a
// call after a bound and returns an error, so that the caller's retries
// and patience apply; Close never waits.
package cqlsession

import (
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"
)

// ErrStuck marks the error of a CreateSession that did not return within
// its bound (Limit).
var ErrStuck = errors.New("creating the Cassandra session did not return")

// Create opens a session of cluster, giving up after Limit(cluster). A
// session that arrives after Create gave up is closed in the background.
func Create(cluster *gocql.ClusterConfig) (*gocql.Session, error) {
	return within(cluster.CreateSession, Limit(cluster))
}

// Limit is how long Create waits for a session of cluster: two of its
// connect timeouts (a dial and a start-up) and two of its request timeouts
// (the topology and schema queries; the pool connects in parallel), never
// under 30 s. A set-up slower than that is retried by the caller like one
// that failed.
func Limit(cluster *gocql.ClusterConfig) time.Duration {
	return max(2*cluster.ConnectTimeout+2*cluster.Timeout, 30*time.Second)
}

// Close closes s in the background and returns at once: what s still
// holds goes when the close completes, and a close that never completes
// holds a goroutine and s's connections, not the caller.
func Close(s *gocql.Session) {
	if s != nil {
		go s.Close()
	}
}

// within returns what create returns, or ErrStuck once limit has passed;
// a session create returns after that is closed.
func within(create func() (*gocql.Session, error), limit time.Duration) (*gocql.Session, error) {
	type result struct {
		session *gocql.Session
		err     error
	}
	done := make(chan result, 1)
	go func() {
		s, err := create()
		done <- result{s, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.session, r.err
	case <-timer.C:
		go func() {
			if r := <-done; r.session != nil {
				Close(r.session)
			}
		}()
		return nil, fmt.Errorf("%w within %s (gocql's session set-up can block for good under load)", ErrStuck, limit)
	}
}
