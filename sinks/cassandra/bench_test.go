package cassandra

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/testenv"
)

// Benchmarks of the sink against real Cassandra, skipping without it. One
// iteration applies a whole stream into a fresh table; run with
//
//	go test -run '^$' -bench . -benchtime 1x ./sinks/cassandra/
//
// and compare the events/s of the sink with those of the plain writer,
// which issues one single-row UPDATE per operation with the same
// concurrency and no bookkeeping: the practical limit of the write path.

const (
	benchEvents      = 60000
	benchConcurrency = 32
	benchBatch       = 1000
)

// userActivitySchema is the shop's user_activity view (issue 5).
func userActivitySchema(keyspace, table string) ViewSchema {
	return ViewSchema{
		Keyspace: keyspace, Table: table, View: useractivity.View,
		Key: []KeyColumn{{Name: "user", Type: "text"}},
		Columns: []ValueColumn{
			{Name: "page_views", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "cart_units", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "purchases", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "spent_cents", Type: "bigint", Merge: envelope.MergeAdd},
			{Name: "last_seen", Type: "timestamp", Merge: envelope.MergeMax},
			{Name: "last_url", Type: "text", Merge: envelope.MergeSet},
		},
	}
}

// userActivityWindowedSchema is user_activity with every column over a
// 7-day window of 1-hour tiles (last_url by latest event time, as a window
// cannot follow ledger order): the windowed sink's benchmark view.
func userActivityWindowedSchema(keyspace, table string) ViewSchema {
	s := userActivitySchema(keyspace, table)
	s.Hop = Span(time.Hour)
	for i := range s.Columns {
		s.Columns[i].Window = Span(7 * 24 * time.Hour)
		if s.Columns[i].Merge == envelope.MergeSet {
			s.Columns[i].Merge = envelope.MergeLatest
		}
	}
	return s
}

// windowedShopStream is shopStream for userActivityWindowedSchema: the
// same operations, last_url merged by latest, with event times 100 ms
// apart (as gen spaces them) up to now: a shop of 10 events a second over
// the last 100 minutes, in tiles that are all live.
func windowedShopStream(b *testing.B) []Op {
	b.Helper()
	start := time.Now().Add(-benchEvents * gen.DefaultInterval)
	ops := shopStreamFrom(b, gen.Options{Events: benchEvents, Users: 1000, SKUs: 100, Seed: 7, Start: start})
	for i := range ops {
		cols := slices.Clone(ops[i].View.Columns)
		for c := range cols {
			if cols[c].Merge == envelope.MergeSet {
				cols[c].Merge = envelope.MergeLatest
			}
		}
		ops[i].View.Columns = cols
	}
	return ops
}

// shopStream turns a generated shop ledger into user_activity operations
// with the real transformation, one ledger partition.
func shopStream(b *testing.B, users int) []Op {
	return shopStreamFrom(b, gen.Options{Events: benchEvents, Users: users, SKUs: 100, Seed: 7})
}

// shopStreamFrom is shopStream of the events gen makes with opts.
func shopStreamFrom(b *testing.B, opts gen.Options) []Op {
	b.Helper()
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, opts); err != nil {
		b.Fatal(err)
	}
	var ops []Op
	sc := bufio.NewScanner(&buf)
	for entry := int64(0); sc.Scan(); entry++ {
		origin := envelope.Origin{Topic: "persistent://shop/ledger/events-partition-0", Position: envelope.Position{Ledger: 1, Entry: entry}}
		recs, err := useractivity.Transformation.Process(transform.Message{Payload: sc.Bytes(), Origin: origin})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			op, err := envelope.DecodeRowOp(r.Payload)
			if err != nil {
				b.Fatal(err)
			}
			ops = append(ops, Op{View: op, Origin: origin})
		}
	}
	return ops
}

// roundRobinStream gives every operation its own row within ten batches:
// user i modulo ten batches' worth, more than the batches in flight at once
// (Pipeline), so nothing coalesces, neither within a batch nor across
// batches waiting on the same row; after the first ten batches every row
// exists and is in the sink's cache, as in a running sink.
func roundRobinStream(b *testing.B) []Op {
	b.Helper()
	ops := shopStream(b, 1000)
	for i := range ops {
		user := fmt.Sprintf("%q", fmt.Sprintf("rr%d", i%(10*benchBatch)))
		ops[i].View.Key = []envelope.KeyValue{{Column: "user", Value: json.RawMessage(user)}}
	}
	return ops
}

// The aims of issue 15 for the sink's events/s against the plain writer's.
const (
	aimShop          = ">= 3x"
	aimNoCoalescing  = ">= 0.9x"
	plainWriterLimit = "plain writer"
)

func BenchmarkShopUserActivity(b *testing.B) {
	benchmarkStreams(b, "shop user_activity", aimShop, userActivitySchema, func(b *testing.B) []Op { return shopStream(b, 1000) })
}

// BenchmarkShopWindowed is the shop stream into a windowed view (7-day
// windows of 1-hour tiles): the sink's tiles against the plain writer's
// single-row UPDATEs of the same (user, tile) rows with their TTL.
func BenchmarkShopWindowed(b *testing.B) {
	benchmarkStreams(b, "shop user_activity windowed 7d/1h", aimShop, userActivityWindowedSchema, windowedShopStream)
}

func BenchmarkNoCoalescing(b *testing.B) {
	benchmarkStreams(b, "no coalescing", aimNoCoalescing, userActivitySchema, roundRobinStream)
}

// benchmarkStreams runs the sink, the sink with one row per request and the
// plain writer over the same stream; with FOLDLINE_BENCH_JSON set, the
// sinks' events/s against the plain writer's go there (internal/benchreport),
// the sink's with aim.
func benchmarkStreams(b *testing.B, name, aim string, schema func(keyspace, table string) ViewSchema, stream func(*testing.B) []Op) {
	session, settings, keyspace := testKeyspace(b)
	ops := stream(b)
	table := 0
	fresh := func(b *testing.B) ViewSchema {
		table++
		s := schema(keyspace, fmt.Sprintf("bench_%d", table))
		if err := EnsureSchema(b.Context(), session, s, settings.Replication); err != nil {
			b.Fatal(err)
		}
		return s
	}
	settings.Concurrency = benchConcurrency
	settings.BatchSize = benchBatch
	rates := map[string]float64{} // events/s of each contender that ran
	sink := func(contender string, settings Settings) {
		b.Run(contender, func(b *testing.B) { rates[contender] = benchmarkSink(b, session, settings, fresh, ops) })
	}
	sink("sink", settings)
	// The same sink with one row per CQL request, as the plain writer
	// sends: what the bookkeeping and the reads cost without the row
	// batches.
	oneRow := settings
	oneRow.RowsPerWrite = 1
	sink("sink-one-row-per-request", oneRow)
	b.Run("plain", func(b *testing.B) {
		var events int
		var elapsed time.Duration
		for b.Loop() {
			b.StopTimer()
			s := fresh(b)
			b.StartTimer()
			start := time.Now()
			plainWrite(b, session, s, ops, settings.consistency())
			elapsed += time.Since(start)
			events += len(ops)
		}
		rates["plain"] = float64(events) / elapsed.Seconds()
		b.ReportMetric(rates["plain"], "events/s")
		b.ReportMetric(rates["plain"], "rows/s")
	})
	emitSinkFigures(b, name, aim, rates)
}

// emitSinkFigures emits the sinks' events/s against the plain writer's, for
// the contenders that ran (a -bench pattern may have left some out).
func emitSinkFigures(b *testing.B, stream, aim string, rates map[string]float64) {
	plain, ok := rates["plain"]
	if !ok {
		return
	}
	var figs []benchreport.Figure
	for _, c := range []struct{ contender, aim string }{{"sink", aim}, {"sink-one-row-per-request", ""}} {
		if rate, ok := rates[c.contender]; ok {
			figs = append(figs, benchreport.Figure{Bench: "sink", Figure: stream + ", " + c.contender, Value: rate, Unit: "events/s"}.
				Against(plainWriterLimit, plain).Aiming(c.aim))
		}
	}
	if err := benchreport.Emit(figs...); err != nil {
		b.Error(err)
	}
}

// plainWrite issues one single-row UPDATE per operation, setting the
// operation's columns to its values, from benchConcurrency goroutines; a
// windowed view's row is the operation's tile, written with its TTL.
func plainWrite(b *testing.B, session *gocql.Session, s ViewSchema, ops []Op, consistency gocql.Consistency) {
	v, err := compileView(s, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	v.now = time.Now
	var sets, where []string
	for _, c := range s.Columns {
		sets = append(sets, quote(c.Name)+" = ?")
	}
	for _, k := range s.StorageKey() {
		where = append(where, quote(k.Name)+" = ?")
	}
	using := ""
	if v.windowed {
		using = " USING TTL ?"
	}
	stmt := fmt.Sprintf("UPDATE %s%s SET %s WHERE %s", s.qualifiedTable(), using, strings.Join(sets, ", "), strings.Join(where, " AND "))
	work := make(chan int)
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for i := range work {
				op, err := v.bind(i, ops[i], nil)
				if err != nil {
					b.Error(err)
					continue
				}
				var args []any
				if v.windowed {
					args = append(args, v.tileTTL(op.key))
				}
				cols := len(args)
				for range s.Columns {
					args = append(args, gocql.UnsetValue)
				}
				for _, c := range op.columns {
					args[cols+c.column] = v.colTypes[c.column].bind(c.value)
				}
				args = append(args, op.key...)
				if err := session.Query(stmt, args...).Consistency(consistency).Idempotent(true).Exec(); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range ops {
		work <- i
	}
	close(work)
	wg.Wait()
}

// benchmarkSink applies ops into a fresh table per iteration through the
// applier with settings, several batches in flight as the Batcher keeps
// them, and returns the events/s.
func benchmarkSink(b *testing.B, session *gocql.Session, settings Settings, fresh func(*testing.B) ViewSchema, ops []Op) float64 {
	var rows, events int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		a, err := NewApplier(session, fresh(b), settings)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		// As the Batcher does: several batches in flight at once.
		inflight := make(chan *Pending, settings.Pipeline)
		done := make(chan int)
		go func() {
			n := 0
			for p := range inflight {
				res := p.Wait()
				for _, err := range res.Errs {
					if err != nil {
						b.Error(err)
					}
				}
				n += res.Rows
			}
			done <- n
		}()
		for i := 0; i < len(ops); i += benchBatch {
			inflight <- a.Start(b.Context(), ops[i:min(i+benchBatch, len(ops))])
		}
		close(inflight)
		rows += <-done
		elapsed += time.Since(start)
		events += len(ops)
		a.Close()
	}
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(events)/float64(rows), "events/row")
	return float64(events) / elapsed.Seconds()
}

// BenchmarkTrickle measures what Cassandra's own process spends per request
// when requests trickle in, as a sink's do at a moderate event rate: one
// single-row UPDATE every 2 ms from one goroutine (about 400 a second here),
// for 5 s. Cassandra's request workers wait for the next request by parking
// for a few microseconds at a time, so at such rates its CPU per request is
// many times what it is under load; the timer slack scripts/stack gives it
// (FOLDLINE_TIMER_SLACK_NS, 1 ms by default) cuts that. Compare a stack
// started with FOLDLINE_TIMER_SLACK_NS=0 (Linux's 50 µs):
//
//	go test -run '^$' -bench Trickle -benchtime 1x ./sinks/cassandra/
//
// It reports Cassandra's CPU per request (µs) and its timer slack (ns), of
// the Cassandra that scripts/stack started (its pid file).
func BenchmarkTrickle(b *testing.B) {
	session, settings, keyspace := testKeyspace(b)
	pid := testenv.ServicePID(b, "cassandra")
	s := userActivitySchema(keyspace, "trickle")
	if err := EnsureSchema(b.Context(), session, s, settings.Replication); err != nil {
		b.Fatal(err)
	}
	slack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", pid))
	stmt := fmt.Sprintf("UPDATE %s SET page_views = ? WHERE %s = ?", s.qualifiedTable(), quote(s.Key[0].Name))
	const interval, span = 2 * time.Millisecond, 5 * time.Second
	var requests int
	var cpu time.Duration
	trickle := func(d time.Duration) (n int) {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			<-tick.C
			if err := session.Query(stmt, int64(n), fmt.Sprintf("u%d", n%300)).Exec(); err != nil {
				b.Fatal(err)
			}
		}
		return n
	}
	trickle(time.Second) // the statement prepared, the workers in their trickle pattern
	for b.Loop() {
		before := proc.CPUTime(pid)
		requests += trickle(span)
		cpu += proc.CPUTime(pid) - before
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(requests), "cassandra-µs/request")
	b.ReportMetric(float64(requests)/(span.Seconds()*float64(b.N)), "requests/s")
	if n, err := strconv.ParseInt(strings.TrimSpace(string(slack)), 10, 64); err == nil {
		b.ReportMetric(float64(n), "timer-slack-ns")
	}
}
