package cassandra

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

func TestParseSpan(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       time.Duration
		bad        bool
	}{
		{name: "days", text: "7d", want: 7 * 24 * time.Hour},
		{name: "hours", text: "1h", want: time.Hour},
		{name: "go duration", text: "1h30m", want: 90 * time.Minute},
		{name: "zero", text: "0d", bad: true},
		{name: "negative", text: "-1h", bad: true},
		{name: "fraction of days", text: "1.5d", bad: true},
		{name: "word", text: "week", bad: true},
		{name: "overflow", text: "999999999999d", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpan(tc.text)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseSpan(%q) = %v, want an error", tc.text, got)
				}
				return
			}
			if err != nil || got.Duration() != tc.want {
				t.Fatalf("ParseSpan(%q) = %v, %v; want %v", tc.text, got, err, tc.want)
			}
			back, err := ParseSpan(got.String())
			if err != nil || back != got {
				t.Fatalf("%q → %s → %v, %v", tc.text, got, back, err)
			}
		})
	}
}

func TestTileStart(t *testing.T) {
	hop := time.Hour
	for _, tc := range []struct{ at, want string }{
		{"2026-12-06T10:30:00Z", "2026-12-06T10:00:00Z"},
		{"2026-12-06T10:00:00Z", "2026-12-06T10:00:00Z"},
		{"2026-12-06T10:59:59.999Z", "2026-12-06T10:00:00Z"},
		{"1969-12-31T23:30:00Z", "1969-12-31T23:00:00Z"},
	} {
		at, _ := time.Parse(time.RFC3339Nano, tc.at)
		want, _ := time.Parse(time.RFC3339, tc.want)
		if got := TileStart(at, hop); !got.Equal(want) {
			t.Errorf("TileStart(%s) = %s, want %s", tc.at, got, want)
		}
	}
}

func windowedSchema() ViewSchema {
	return ViewSchema{Keyspace: "ks", Table: "w_v1", View: "w", Hop: Span(time.Hour),
		Key: []KeyColumn{{Name: "user", Type: "text"}},
		Columns: []ValueColumn{
			{Name: "n_7d", Type: "bigint", Merge: envelope.MergeAdd, Window: Span(7 * 24 * time.Hour)},
			{Name: "sum_1d", Type: "bigint", Merge: envelope.MergeAdd, Window: Span(24 * time.Hour)},
			{Name: "min_1d", Type: "bigint", Merge: envelope.MergeMin, Window: Span(24 * time.Hour)},
			{Name: "max_7d", Type: "bigint", Merge: envelope.MergeMax, Window: Span(7 * 24 * time.Hour)},
			{Name: "last_2h", Type: "bigint", Merge: envelope.MergeLatest, Window: Span(2 * time.Hour)},
			{Name: "avg_1d_sum", Type: "double", Merge: envelope.MergeAdd, Window: Span(24 * time.Hour)},
			{Name: "avg_1d_count", Type: "bigint", Merge: envelope.MergeAdd, Window: Span(24 * time.Hour)},
		},
		Averages: []Average{{Name: "avg_1d", Sum: "avg_1d_sum", Count: "avg_1d_count"}}}
}

func TestWindowedSchemaValidate(t *testing.T) {
	if err := windowedSchema().Validate(); err != nil {
		t.Fatalf("valid schema: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*ViewSchema)
		want   string
	}{
		{"no hop", func(s *ViewSchema) { s.Hop = 0 }, "hop: a windowed view needs one"},
		{"hop too short", func(s *ViewSchema) { s.Hop = Span(time.Second) }, "at least 1m"},
		{"window not whole hops", func(s *ViewSchema) { s.Columns[1].Window = Span(90 * time.Minute) }, "columns[1].window 90m: a whole number of hops"},
		{"mixed", func(s *ViewSchema) { s.Columns[0].Window = 0 }, "columns[0].window: column n_7d has none"},
		{"set", func(s *ViewSchema) { s.Columns[4].Merge = envelope.MergeSet }, "columns[4].merge set"},
		{"average named as a column", func(s *ViewSchema) { s.Averages[0].Name = "n_7d" }, `averages[0].name "n_7d": column defined twice`},
		{"average of no column", func(s *ViewSchema) { s.Averages[0].Sum = "avg_sum" }, `averages[0].sum "avg_sum": not a column of the view`},
		{"average of a max", func(s *ViewSchema) { s.Averages[0].Count = "max_7d" }, `averages[0].count "max_7d": merges by max`},
		{"average over two windows", func(s *ViewSchema) { s.Averages[0].Count = "n_7d" }, "an average's parts share their window"},
		{"hop without windows", func(s *ViewSchema) {
			for i := range s.Columns {
				s.Columns[i].Window = 0
			}
		}, "only a view whose columns have a window takes a hop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := windowedSchema()
			s.Columns, s.Averages = slices.Clone(s.Columns), slices.Clone(s.Averages)
			tc.change(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestWindowedTableCQL(t *testing.T) {
	got := windowedSchema().TableCQL()
	if !strings.Contains(got, `PRIMARY KEY (("user"), "fl_tile")) WITH CLUSTERING ORDER BY ("fl_tile" DESC)`) ||
		!strings.Contains(got, `"fl_tile" timestamp`) {
		t.Fatalf("TableCQL() = %s", got)
	}
	_, appendCQL, _ := statements(windowedSchema())
	if !strings.Contains(appendCQL, "USING TTL ?") || !strings.HasSuffix(appendCQL, `"user" = ? AND "fl_tile" = ?`) {
		t.Fatalf("append statement: %s", appendCQL)
	}
}

// windowEvent is one event of the windowed fold tests.
type windowEvent struct {
	user  string
	at    time.Time
	value int64
	// origin partition and position: one partition's events are delivered
	// in order, partitions interleave.
	topic string
	entry int64
}

func (e windowEvent) op() Op {
	cols := []envelope.ColumnOp{
		{Column: "n_7d", Merge: envelope.MergeAdd, Value: json.RawMessage(`1`)},
		{Column: "sum_1d", Merge: envelope.MergeAdd, Value: json.RawMessage(fmt.Sprint(e.value))},
		{Column: "min_1d", Merge: envelope.MergeMin, Value: json.RawMessage(fmt.Sprint(e.value))},
		{Column: "max_7d", Merge: envelope.MergeMax, Value: json.RawMessage(fmt.Sprint(e.value))},
		{Column: "last_2h", Merge: envelope.MergeLatest, Value: json.RawMessage(fmt.Sprint(e.value))},
		{Column: "avg_1d_sum", Merge: envelope.MergeAdd, Value: json.RawMessage(fmt.Sprint(e.value))},
		{Column: "avg_1d_count", Merge: envelope.MergeAdd, Value: json.RawMessage(`1`)},
	}
	key, _ := json.Marshal(e.user)
	return Op{
		View:   envelope.RowOp{View: "w", Key: []envelope.KeyValue{{Column: "user", Value: key}}, Kind: envelope.OpApply, EventTime: e.at, Columns: cols},
		Origin: envelope.Origin{Topic: e.topic, Position: envelope.Position{Ledger: 3, Entry: e.entry}},
	}
}

// foldByEventTime is the independent definition of a windowed column's
// value as of at: the events whose own time falls in [T - W, T + hop),
// T the start of at's hour, whatever order they arrived in. The average
// is the mean of the day's values, absent without any.
func foldByEventTime(events []windowEvent, user string, at time.Time) map[string]any {
	out := map[string]any{}
	tileOfAt := at.Truncate(time.Hour)
	in := func(e windowEvent, w time.Duration) bool {
		return e.user == user && !e.at.Before(tileOfAt.Add(-w)) && e.at.Before(tileOfAt.Add(time.Hour))
	}
	var n, sum, minV, maxV int64
	var last int64
	var lastAt time.Time
	var sawDay, sawWeek, sawLast bool
	var day []int64
	for _, e := range events {
		if in(e, 7*24*time.Hour) {
			n++
			if !sawWeek || e.value > maxV {
				maxV = e.value
			}
			sawWeek = true
		}
		if in(e, 24*time.Hour) {
			sum += e.value
			day = append(day, e.value)
			if !sawDay || e.value < minV {
				minV = e.value
			}
			sawDay = true
		}
		if in(e, 2*time.Hour) && (!sawLast || e.at.After(lastAt)) {
			last, lastAt, sawLast = e.value, e.at, true
		}
	}
	if sawWeek {
		out["n_7d"], out["max_7d"] = n, maxV
	}
	if sawDay {
		out["sum_1d"], out["min_1d"] = sum, minV
		var daySum float64
		for _, v := range day {
			daySum += float64(v)
		}
		out["avg_1d_sum"], out["avg_1d_count"] = daySum, int64(len(day))
		out["avg_1d"] = daySum / float64(len(day))
	}
	if sawLast {
		out["last_2h"] = last
	}
	return out
}

// windowEvents makes n events of a few users over ten days, each with a
// distinct time, from three origin partitions in ledger order, with event
// times that do not follow ledger order (late events included).
func windowEvents(rng *rand.Rand, n int, start time.Time) []windowEvent {
	events := make([]windowEvent, n)
	used := map[int64]bool{}
	for i := range events {
		ms := rng.Int64N(int64(10 * 24 * time.Hour / time.Millisecond))
		for used[ms] {
			ms++
		}
		used[ms] = true
		events[i] = windowEvent{user: fmt.Sprintf("u%d", rng.IntN(4)), at: start.Add(time.Duration(ms) * time.Millisecond),
			value: rng.Int64N(2000) - 1000, topic: fmt.Sprintf("persistent://t/n/ledger-partition-%d", i%3), entry: int64(i)}
	}
	return events
}

// deliveries is ops in a delivery order a sink may see: partitions
// interleaved at random, each partition in order, with redelivered runs.
func deliveries(rng *rand.Rand, events []windowEvent) []Op {
	byTopic := map[string][]windowEvent{}
	var topics []string
	for _, e := range events {
		if _, ok := byTopic[e.topic]; !ok {
			topics = append(topics, e.topic)
		}
		byTopic[e.topic] = append(byTopic[e.topic], e)
	}
	next := map[string]int{}
	var ops []Op
	for len(topics) > 0 {
		i := rng.IntN(len(topics))
		tp := topics[i]
		k := next[tp]
		ops = append(ops, byTopic[tp][k].op())
		if rng.IntN(10) == 0 { // a redelivery of a recent run
			for j := max(0, k-3); j <= k; j++ {
				ops = append(ops, byTopic[tp][j].op())
			}
		}
		next[tp]++
		if next[tp] == len(byTopic[tp]) {
			topics = slices.Delete(topics, i, i+1)
		}
	}
	return ops
}

func TestMemTableWindowsEqualFoldByEventTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 43))
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	events := windowEvents(rng, 3000, start)
	m, err := NewMemTable(windowedSchema())
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range deliveries(rng, events) {
		if _, err := m.Apply(op); err != nil {
			t.Fatalf("applying operation %d: %v", i, err)
		}
	}
	if m.Totals.Applied != int64(len(events)) {
		t.Fatalf("applied %d operations, want %d (one per event; redeliveries skipped)", m.Totals.Applied, len(events))
	}
	for range 500 {
		at := start.Add(time.Duration(rng.Int64N(int64(12 * 24 * time.Hour))))
		user := fmt.Sprintf("u%d", rng.IntN(5)) // u4 has no events
		want := foldByEventTime(events, user, at)
		row, found := m.AsOf([]any{user}, at)
		if !found {
			row.Values = map[string]any{}
		}
		if !SameValues(row, MemRow{Values: want}) {
			t.Fatalf("%s as of %s: got %v, want %v", user, at, row.Values, want)
		}
	}
}

func TestWindowedBindRules(t *testing.T) {
	v := mustCompile(t, windowedSchema())
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	v.now = func() time.Time { return now }
	e := windowEvent{user: "u", value: 1, topic: "p0", entry: 1}
	for _, tc := range []struct {
		name string
		op   func() Op
		want error
	}{
		{"no event time", func() Op { return e.op() }, ErrBadValue},
		{"delete", func() Op {
			o := windowEvent{user: "u", at: now, topic: "p0"}.op()
			o.View.Kind, o.View.Columns = envelope.OpDelete, nil
			return o
		}, ErrBadValue},
		// 7d + 1h after its tile's start, a tile has expired.
		{"expired", func() Op { return windowEvent{user: "u", at: now.Add(-7*24*time.Hour - time.Hour), topic: "p0"}.op() }, ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.bind(0, tc.op(), nil); !errors.Is(err, tc.want) {
				t.Fatalf("bind = %v, want %v", err, tc.want)
			}
		})
	}
	kept := windowEvent{user: "u", at: now.Add(-7*24*time.Hour + time.Minute), topic: "p0"}.op()
	b, err := v.bind(0, kept, nil)
	if err != nil {
		t.Fatalf("an event inside the longest window: %v", err)
	}
	tile := b.key[1].(time.Time)
	if want := now.Add(-7 * 24 * time.Hour); !tile.Equal(want) {
		t.Fatalf("tile %s, want %s", tile, want)
	}
	if ttl := v.tileTTL(b.key); ttl != int(time.Hour/time.Second) {
		t.Fatalf("TTL %d s, want one hour: the tile expires at its start + 7d + 1h", ttl)
	}
}

// TestApplierWindowsEqualFoldByEventTime applies a windowed view's
// operations, late events, redeliveries and a restart included, to the real
// Cassandra, and checks every entity's window as of several times, read
// back tile by tile, against the independent fold by event time; events
// whose tile had expired are dropped and counted, and every tile carries
// the TTL of its start + the longest window + the hop.
func TestApplierWindowsEqualFoldByEventTime(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	rng := rand.New(rand.NewPCG(11, 5))
	now := time.Now().UTC()
	// Ten days back from now: the first three days' tiles have expired (the
	// longest window is 7 days), so their events are dropped.
	start := now.Add(-10 * 24 * time.Hour)
	s := windowedSchema()
	s.Keyspace = keyspace
	// No event in the tiles around the expiry cut-off, which moves while
	// the test runs: each event's tile is clearly live or clearly expired.
	cutoff := now.Add(-s.Retention())
	var events []windowEvent
	for _, e := range windowEvents(rng, 1200, start) {
		if tile := TileStart(e.at, time.Hour); tile.Before(cutoff.Add(-2*time.Hour)) || tile.After(cutoff.Add(2*time.Hour)) {
			events = append(events, e)
		}
	}
	for _, cache := range []int{0, -1} {
		t.Run(fmt.Sprintf("row cache %d", cache), func(t *testing.T) {
			s.Table = fmt.Sprintf("windows_%d", -cache)
			st := settings
			st.RowCache = cache
			a := newTestApplier(t, session, s, st)
			ops := deliveries(rng, events)
			half := len(ops) / 2
			first := applyAll(t, a, ops[:half])
			a = newTestApplier(t, session, s, st) // a restart: the second half redelivers part of the first
			second := applyAll(t, a, ops[half/2:])

			var live []windowEvent
			expired := 0
			for _, e := range events {
				if TileStart(e.at, time.Hour).After(cutoff) {
					live = append(live, e)
				} else {
					expired++
				}
			}
			if expired == 0 || first.Expired+second.Expired < expired {
				t.Errorf("%d operations counted expired, want at least %d (every event whose tile had expired, some twice)", first.Expired+second.Expired, expired)
			}
			for range 60 {
				at := now.Add(-time.Duration(rng.Int64N(int64(2 * 24 * time.Hour))))
				user := fmt.Sprintf("u%d", rng.IntN(4))
				from, to := WindowTiles(at, Span(7*24*time.Hour), time.Hour)
				tiles, err := ReadTiles(t.Context(), session, s, []any{user}, from, to, settings.consistency())
				if err != nil {
					t.Fatal(err)
				}
				got := MemRow{Values: s.CombineTiles(tiles, at)}
				if want := foldByEventTime(live, user, at); !SameValues(got, MemRow{Values: want}) {
					t.Fatalf("%s as of %s: Cassandra's tiles give %v, the fold by event time %v", user, at, got.Values, want)
				}
			}
			var ttl int
			if err := session.Query(fmt.Sprintf(`SELECT TTL(n_7d) FROM %s LIMIT 1`, s.qualifiedTable())).Scan(&ttl); err != nil {
				t.Fatal(err)
			}
			if ttl <= 0 || ttl > int(s.Retention()/time.Second) {
				t.Fatalf("a tile's TTL is %d s, want between 1 and %d", ttl, int(s.Retention()/time.Second))
			}
		})
	}
}
