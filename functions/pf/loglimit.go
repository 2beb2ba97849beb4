package pf

import (
	"sync"
	"time"
)

// logLimit bounds how many lines of one kind an instance logs per window:
// a stream of malformed events sends each to the dead-letter topic, where
// each keeps its reason, and a warning per event on top of that filled the
// worker's log (and the log topic) with hundreds of lines a second. The
// first burst lines of each window are logged; the rest are counted, and
// the next line logged says how many were left out before it.
type logLimit struct {
	window time.Duration
	burst  int

	mu      sync.Mutex
	start   time.Time // of the current window
	logged  int       // lines logged in the current window
	omitted int       // lines left out since the last one logged
}

// deadLetterLogLimit: at most 10 dead-letter warnings a second per instance.
func deadLetterLogLimit() *logLimit { return &logLimit{window: time.Second, burst: 10} }

// allow reports whether a line at now is logged and, when it is, how many
// were left out before it.
func (l *logLimit) allow(now time.Time) (ok bool, omitted int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.window || now.Before(l.start) {
		l.start, l.logged = now, 0
	}
	if l.logged >= l.burst {
		l.omitted++
		return false, 0
	}
	l.logged++
	omitted, l.omitted = l.omitted, 0
	return true, omitted
}
