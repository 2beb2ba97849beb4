package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a manifest's length of time: a Go duration ("36h", "90m")
// or whole days ("7d"). Set tells a duration written 0 from one not
// written.
type Duration struct {
	D   time.Duration
	Set bool
}

// UnmarshalText reads "7d" or a Go duration; negative ones are refused.
func (d *Duration) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	var v time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return fmt.Errorf("%q: want a duration such as 24h, 90m or 7d", s)
		}
		v = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if v, err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("%q: want a duration such as 24h, 90m or 7d", s)
		}
	}
	if v < 0 {
		return fmt.Errorf("%q: want a duration of 0 or more", s)
	}
	*d = Duration{D: v, Set: true}
	return nil
}

// MarshalText writes the Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.D.String()), nil }

// DefaultRollbackGrace is how long a view's previous table version keeps
// following the ledger after a switch, unless its manifest says otherwise
// (View.RollbackGrace).
const DefaultRollbackGrace = 24 * time.Hour

// Grace is how long v's previous table keeps following the ledger after a
// switch (rollbackGrace, default DefaultRollbackGrace).
func (v *View) Grace() time.Duration {
	if v.RollbackGrace.Set {
		return v.RollbackGrace.D
	}
	return DefaultRollbackGrace
}
