package verify

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

// The keys and values of the rows verify shows are the events': an event
// whose user is a terminal escape, or a line of forged output, shows as
// text.
func TestWriteEscapesTheRowsItShows(t *testing.T) {
	res := &Result{View: "user_activity", Table: "user_activity_v1", Examples: []Example{{
		Kind:  "different",
		Key:   "u1\x1b]0;pwned\x07",
		Fold:  map[string]any{"last_url": "/a\nconsistency 100.00%: all rows consistent"},
		Table: map[string]any{"last_url": "/b\u202e"},
	}}}
	var out strings.Builder
	res.Write(&out)
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x07\u202e") || strings.Count(text, "\n") != 3 {
		t.Fatalf("Write printed a control character or a forged line:\n%q", text)
	}
	for _, want := range []string{`u1\x1b]0;pwned\a`, `/a\nconsistency`, `/b\u202e`} {
		if !strings.Contains(text, want) {
			t.Errorf("Write printed %q, want %s in it", text, want)
		}
	}
}

// A metrics address verify cannot listen on (here: a port taken) is an
// error before anything runs, not a scheduled verify without metrics.
func TestScheduleReturnsTheMetricsListenError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	opts := Options{View: "user_activity"}
	opts.Dir = t.TempDir() // no manifests: a verification would fail at once
	var runs int
	err = Schedule(ctx, opts, time.Hour, taken.Addr().String(), func(*Result, error) {
		runs++
		cancel() // without the listen error, end after the first run
	})
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.Is(err, exitcode.ErrUsage) || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("Schedule on a taken port: %v, want the listen error naming %s", err, taken.Addr())
	}
	if runs != 0 {
		t.Errorf("Schedule verified %d times before failing to listen, want none", runs)
	}
}
