package cassandra

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

// Windowed views.
//
// A column with a Window aggregates over a sliding event-time window
// instead of all time. Such a view is stored as tiles: one row per entity
// and tile, where a tile holds the view's columns folded over the events
// whose own time falls in [tile start, tile start + hop). The tile start is
// one more key column (ColumnTile, clustering, newest first), so each tile
// is a row like any other for the exactly-once rules: its own applied
// positions, its own latest-at times.
//
// The value of a column with window W as of time t combines the tiles
// whose start lies in [T - W, T], where T is the start of t's tile: the
// events from T - W (inclusive) up to t when they arrived on time, so a
// window between W and W + hop long, as Chronon's sawtooth windows. Counts
// and sums add the tiles, min and max take the least and greatest, latest
// takes the value of the latest event time.
//
// A tile is needed until the last t whose window reaches it, T = start +
// W_max, so it expires (Cassandra TTL) at start + W_max + hop. The sink drops
// an operation whose tile has already expired, counting it as expired: its
// row would be gone at once, and no read of the present would see it.
// Folds in memory (MemTable: verify, training sets) keep every tile.

// ColumnTile is the start of a windowed view's tile: a clustering column
// of its table, after the view's key.
const ColumnTile = "fl_tile"

// ErrExpired marks an operation on a windowed view whose tile has expired:
// the sink drops it and counts it (Result.Expired) instead of applying or
// dead-lettering it.
var ErrExpired = errors.New("operation's tile has expired")

// Span is a duration as manifests write it: a whole number followed by d
// (days of 24 hours), h, m or s, e.g. "7d", "1h", "90s"; or a Go duration
// ("1h30m").
type Span time.Duration

// ParseSpan reads a Span.
func ParseSpan(text string) (Span, error) {
	if n, ok := strings.CutSuffix(text, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days <= 0 || days > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("span %q: want a positive whole number of days, e.g. 7d", text)
		}
		return Span(time.Duration(days) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("span %q: want a positive duration such as 30d, 7d, 1h, 5m", text)
	}
	return Span(d), nil
}

// Duration is the span as a time.Duration.
func (s Span) Duration() time.Duration { return time.Duration(s) }

// String writes the span in the largest unit that divides it.
func (s Span) String() string {
	d := time.Duration(s)
	switch {
	case d == 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// MarshalText writes String.
func (s Span) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads ParseSpan.
func (s *Span) UnmarshalText(text []byte) error {
	v, err := ParseSpan(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// minHop is the shortest hop: tile starts are CQL timestamps (milliseconds)
// and a tile per few seconds would make every read of a long window scan
// thousands of rows.
const minHop = time.Minute

// Windowed reports whether the view's columns aggregate over windows.
func (s ViewSchema) Windowed() bool {
	for _, c := range s.Columns {
		if c.Window != 0 {
			return true
		}
	}
	return false
}

// StorageKey is the key of the view's table: the view's key, then for a
// windowed view the tile start (ColumnTile).
func (s ViewSchema) StorageKey() []KeyColumn {
	if !s.Windowed() {
		return s.Key
	}
	return append(append(make([]KeyColumn, 0, len(s.Key)+1), s.Key...), KeyColumn{Name: ColumnTile, Type: "timestamp"})
}

// Retention is how long after its start a tile is needed: the longest
// window plus the hop. Zero for a view without windows.
func (s ViewSchema) Retention() time.Duration {
	var longest Span
	for _, c := range s.Columns {
		longest = max(longest, c.Window)
	}
	if longest == 0 {
		return 0
	}
	return longest.Duration() + s.Hop.Duration()
}

// validateWindows adds the problems of the view's windows to problem.
func (s ViewSchema) validateWindows(problem func(format string, args ...any)) {
	if !s.Windowed() {
		if s.Hop != 0 {
			problem("hop %s: only a view whose columns have a window takes a hop", s.Hop)
		}
		return
	}
	hop := s.Hop.Duration()
	switch {
	case hop <= 0:
		problem("hop: a windowed view needs one (the tile size, e.g. 1h for a 7d window)")
	case hop < minHop:
		problem("hop %s: at least %s", s.Hop, Span(minHop))
	case hop%time.Second != 0:
		problem("hop %s: a whole number of seconds", s.Hop)
	}
	for i, c := range s.Columns {
		field := fmt.Sprintf("columns[%d]", i)
		if c.Window == 0 {
			problem("%s.window: column %s has none, but the view's other columns do: a view's columns are all windowed or none (put all-time columns in a view of their own)", field, c.Name)
			continue
		}
		if hop > 0 && (c.Window.Duration() < hop || c.Window.Duration()%hop != 0) {
			problem("%s.window %s: a whole number of hops (%s)", field, c.Window, s.Hop)
		}
		switch c.Merge {
		case envelope.MergeAdd, envelope.MergeMin, envelope.MergeMax, envelope.MergeLatest:
		default:
			problem("%s.merge %s: a windowed column merges by add, min, max or latest (set follows ledger order, which tiles of event time cannot)", field, c.Merge)
		}
	}
}

// TileStart is the start of the tile holding an event at t: t rounded down
// to a multiple of the hop since the Unix epoch.
func TileStart(t time.Time, hop time.Duration) time.Time {
	ms, h := t.UnixMilli(), hop.Milliseconds()
	tile := ms - ms%h
	if ms%h < 0 {
		tile -= h
	}
	return time.UnixMilli(tile).UTC()
}

// WindowTiles is the range of tile starts, both inclusive, that the value of
// a column with window w as of t combines.
func WindowTiles(at time.Time, window Span, hop time.Duration) (first, last time.Time) {
	last = TileStart(at, hop)
	return last.Add(-window.Duration()), last
}

// Tile is one tile of an entity: its start and its row's values (by column
// name, absent for null) with the event time of each latest column's value.
type Tile struct {
	Start    time.Time
	Values   map[string]any
	LatestAt map[string]time.Time
}

// CombineTiles is the value of every column as of at from the entity's
// tiles (in any order, any range: each column takes the tiles of its own
// window): column name to value, absent where no event of the window gave
// the column one; then each average, the window's sum over its count
// (AddAverages). It is the one definition of a window's value that the
// reader, training sets and verify share.
func (s ViewSchema) CombineTiles(tiles []Tile, at time.Time) map[string]any {
	out := map[string]any{}
	hop := s.Hop.Duration()
	for _, c := range s.Columns {
		first, last := WindowTiles(at, c.Window, hop)
		var value any
		var valueAt time.Time
		for _, t := range tiles {
			v, ok := t.Values[c.Name]
			if !ok || v == nil || t.Start.Before(first) || t.Start.After(last) {
				continue
			}
			switch {
			case value == nil:
				value, valueAt = v, t.LatestAt[c.Name]
			case c.Merge == envelope.MergeAdd:
				value = addCanonical(value, v)
			case c.Merge == envelope.MergeMin && compareValues(v, value) < 0,
				c.Merge == envelope.MergeMax && compareValues(v, value) > 0:
				value = v
			case c.Merge == envelope.MergeLatest:
				// Tiles hold disjoint spans of event time: no ties.
				if at := t.LatestAt[c.Name]; at.After(valueAt) {
					value, valueAt = v, at
				}
			}
		}
		if value != nil {
			out[c.Name] = value
		}
	}
	s.AddAverages(out)
	return out
}

// addCanonical adds two canonical numbers. A window's sum is a sum of
// tiles the sink accepted, each within the column's type; the window's
// total is reported as the wider Go type without a range check, as a CQL
// sum() of the tiles would be.
func addCanonical(a, b any) any {
	switch x := a.(type) {
	case int64:
		return x + b.(int64)
	case float64:
		return x + b.(float64)
	}
	return a
}
