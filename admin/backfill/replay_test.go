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
		until      string
		ledgers    int
		key, value string
	}{
		{"2026-11-30T11:00:00Z", 2, pf.UserConfigUntilPublishTime, "2026-11-30T11:00:00Z"},
		{"2026-11-30T13:00:00+02:00", 1, pf.UserConfigUntilPublishTime, "2026-11-30T11:00:00Z"},
		{"12:34", 1, pf.UserConfigUntilPosition, "12:34:2147483647"},
		{"12:34:5", 1, pf.UserConfigUntilPosition, "12:34:5"},
	} {
		key, value, err := cutoff(tc.until, now, tc.ledgers)
		if err != nil || key != tc.key || value != tc.value {
			t.Errorf("cutoff(%q) = %q, %q, %v; want %q, %q", tc.until, key, value, err, tc.key, tc.value)
		}
	}
	for _, tc := range []struct {
		until   string
		ledgers int
	}{
		{"2026-11-30T12:00:01Z", 1}, // the future
		{"yesterday", 1},
		{"12", 1},
		{"12:x", 1},
		{"12:34", 2}, // a position, two ledger topics
	} {
		if _, _, err := cutoff(tc.until, now, tc.ledgers); !errors.Is(err, exitcode.ErrUsage) {
			t.Errorf("cutoff(%q) with %d ledger topics: err %v, want a usage error", tc.until, tc.ledgers, err)
		}
	}
}
