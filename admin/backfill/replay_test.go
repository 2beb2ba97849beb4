package backfill

import (
	"errors"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/functions/pf"
)

func TestCutoff(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		until, clock string
		ledgers      int
		key, value   string
	}{
		{"2026-11-30T11:00:00Z", ClockPublish, 2, pf.UserConfigUntilPublishTime, "2026-11-30T11:00:00Z"},
		{"2026-11-30T13:00:00+02:00", ClockPublish, 1, pf.UserConfigUntilPublishTime, "2026-11-30T11:00:00Z"},
		{"2026-11-30T13:00:00+02:00", ClockEvent, 1, pf.UserConfigUntilEventTime, "2026-11-30T11:00:00Z"},
		{"12:34", ClockPublish, 1, pf.UserConfigUntilPosition, "12:34:2147483647"},
		{"12:34:5", ClockPublish, 1, pf.UserConfigUntilPosition, "12:34:5"},
	} {
		key, value, err := cutoff(tc.until, tc.clock, now, tc.ledgers)
		if err != nil || key != tc.key || value != tc.value {
			t.Errorf("cutoff(%q) = %q, %q, %v; want %q, %q", tc.until, key, value, err, tc.key, tc.value)
		}
	}
	for _, tc := range []struct {
		until, clock string
		ledgers      int
	}{
		{"2026-11-30T12:00:01Z", ClockPublish, 1}, // the future
		{"yesterday", ClockPublish, 1},
		{"12", ClockPublish, 1},
		{"12:x", ClockPublish, 1},
		{"12:34", ClockPublish, 2}, // a position, two ledger topics
		{"12:34", ClockEvent, 1},   // event time wants a time
	} {
		if _, _, err := cutoff(tc.until, tc.clock, now, tc.ledgers); !errors.Is(err, exitcode.ErrUsage) {
			t.Errorf("cutoff(%q) with %d ledger topics: err %v, want a usage error", tc.until, tc.ledgers, err)
		}
	}
}
