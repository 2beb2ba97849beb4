// Package progress draws the live progress line of long admin commands
// (ingest, backfill): a bar, the count out of the total, the rate and the
// time left. On a terminal the line redraws in place; elsewhere (CI logs,
// pipes) it prints a plain line every few seconds, so logs stay readable.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar reports the progress of one task. It is safe for concurrent use.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	unit     string
	total    int64
	done     int64
	start    time.Time
	lastDraw time.Time
	tty      bool
	every    time.Duration
	now      func() time.Time
}

// New starts a bar for total units of work (0 when the total is unknown),
// drawing on w. unit names what is counted in the rate ("ev" gives "ev/s").
func New(w io.Writer, label, unit string, total int64) *Bar {
	b := &Bar{w: w, label: label, unit: unit, total: total, now: time.Now, every: 5 * time.Second}
	if IsTerminal(w) {
		b.tty = true
		b.every = 100 * time.Millisecond
	}
	b.start = b.now()
	return b
}

// IsTerminal reports whether stream (an output, or an input such as
// os.Stdin) is an interactive terminal. Only an *os.File can be one, and
// not every character device is: /dev/null is not.
func IsTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && isTerminal(f)
}

// Set records that done units are finished and redraws if it is time to.
func (b *Bar) Set(done int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = done
	if now := b.now(); now.Sub(b.lastDraw) >= b.every {
		b.lastDraw = now
		b.draw(now)
	}
}

// Finish draws the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(b.now())
	if b.tty {
		fmt.Fprintln(b.w)
	}
}

func (b *Bar) draw(now time.Time) {
	line := Format(b.label, b.unit, b.done, b.total, now.Sub(b.start), b.tty)
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(b.w, line)
}

// Format renders one progress line; bar adds the drawn bar (for terminals).
func Format(label, unit string, done, total int64, elapsed time.Duration, bar bool) string {
	var sb strings.Builder
	sb.WriteString(label)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	if total > 0 {
		frac := float64(done) / float64(total)
		frac = min(max(frac, 0), 1)
		if bar {
			const width = 30
			filled := int(frac * width)
			sb.WriteString(" [" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "]")
		}
		fmt.Fprintf(&sb, " %5.1f%% %d/%d", frac*100, done, total)
	} else {
		fmt.Fprintf(&sb, " %d", done)
	}
	fmt.Fprintf(&sb, " %s %s/s", humanRate(rate), unit)
	if total > 0 && done < total && rate > 0 {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		fmt.Fprintf(&sb, " ETA %s", eta.Round(time.Second))
	} else if total > 0 && done >= total {
		fmt.Fprintf(&sb, " in %s", elapsed.Round(100*time.Millisecond))
	}
	return sb.String()
}

func humanRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e4:
		return fmt.Sprintf("%.1fk", r/1e3)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}
