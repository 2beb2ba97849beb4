package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name    string
		done    int64
		total   int64
		elapsed time.Duration
		bar     bool
		want    string
	}{
		{name: "half way with ETA", done: 50_000, total: 100_000, elapsed: 2 * time.Second,
			want: "ingest  50.0% 50000/100000 25.0k ev/s ETA 2s"},
		{name: "finished", done: 10, total: 10, elapsed: 1500 * time.Millisecond,
			want: "ingest 100.0% 10/10 7 ev/s in 1.5s"},
		{name: "unknown total", done: 1234, elapsed: time.Second,
			want: "ingest 1234 1234 ev/s"},
		{name: "bar on a terminal", done: 1, total: 2, elapsed: time.Second, bar: true,
			want: "ingest [===============               ]  50.0% 1/2 1 ev/s ETA 1s"},
		{name: "millions", done: 3_000_000, total: 6_000_000, elapsed: time.Second,
			want: "ingest  50.0% 3000000/6000000 3.00M ev/s ETA 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Format("ingest", "ev", tc.done, tc.total, tc.elapsed, tc.bar)
			if got != tc.want {
				t.Errorf("Format() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBarPlainOutputIsThrottled(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	b := New(&buf, "ingest", "ev", 100)
	b.now = func() time.Time { return clock }
	b.start = clock
	for i := int64(1); i <= 100; i++ {
		clock = clock.Add(100 * time.Millisecond)
		b.Set(i)
	}
	b.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// 10 s of work at one line per 5 s, plus the final line.
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), buf.String())
	}
	if want := "ingest 100.0% 100/100 10 ev/s in 10s"; lines[2] != want {
		t.Errorf("last line %q, want %q", lines[2], want)
	}
}
