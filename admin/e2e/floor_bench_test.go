package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// BenchmarkFloorVsReader measures, in one run, the floor (timeFloor: the
// ledger read, transformed and folded into Cassandra in this one process)
// against a plain reader of the same ledger, and prints both with the CPU
// time per event that this process, Pulsar and Cassandra spent on each. No
// backfill is deployed; the live pipeline has caught up before either is
// timed. N is FOLDLINE_BENCH_EVENTS (default 200000). When
// FOLDLINE_BENCH_JSON names a file, the figures are appended to it as JSON
// lines (internal/benchreport). Both run with the garbage collector set as the
// function runtime sets it (runtimeGC). FOLDLINE_FLOOR_CPUPROFILE names a
// file for a CPU profile of the floor.
//
//	go test ./admin/e2e -run '^$' -bench FloorVsReader -benchtime 1x -timeout 30m
func BenchmarkFloorVsReader(b *testing.B) {
	s, n, ledger := deployBenchLedger(b, "floorbench")
	pids := map[string]int{"this process": os.Getpid(), "pulsar": testenv.ServicePID(b, "pulsar"), "cassandra": testenv.ServicePID(b, "cassandra")}
	processes := []string{"this process", "pulsar", "cassandra"}

	defer runtimeGC()() // for the reader and the floor alike
	for b.Loop() {
		readTime, readCPU := readBest(b, s.svc, ledger, n, pids)
		floorTime, floorCPU := timeFloor(b, s, ledger, n, pids)

		perEvent := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "events\twhat\ttime\tevents/s\tvs reader\t")
		for _, p := range processes {
			fmt.Fprintf(tw, "CPU µs/event %s\t", p)
		}
		fmt.Fprintln(tw)
		row := func(what string, d time.Duration, cpu map[string]time.Duration) {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.2f×\t", n, what, d.Round(10*time.Millisecond), float64(n)/d.Seconds(), d.Seconds()/readTime.Seconds())
			for _, p := range processes {
				fmt.Fprintf(tw, "%.1f\t", perEvent(cpu[p]))
			}
			fmt.Fprintln(tw)
		}
		row("plain reader, ledger only", readTime, readCPU)
		row("one process, no topics (floor)", floorTime, floorCPU)
		tw.Flush()

		ratio := floorTime.Seconds() / readTime.Seconds()
		ownCPU, readerCPU := perEvent(floorCPU["this process"]), perEvent(readCPU["this process"])
		b.ReportMetric(ratio, "floor/read")
		b.ReportMetric(ownCPU, "cpu-µs/event")
		if err := benchreport.Emit(
			benchreport.Figure{Bench: "floor", Figure: "floor time", Value: floorTime.Seconds(), Unit: "s"}.Against("plain read", readTime.Seconds()).Aiming("<= 3x"),
			benchreport.Figure{Bench: "floor", Figure: "floor CPU of this process per event", Value: ownCPU, Unit: "µs"}.Against("plain read CPU of this process per event", readerCPU).Aiming("<= 10 µs"),
		); err != nil {
			b.Fatal(err)
		}
	}
}

// runtimeGC sets this process's garbage collector as the function runtime
// sets every deployed instance's by default (functions/pf's tuneRuntime:
// gcPercent 400, and the 512 MB that foldline deploy gives the sink), unless
// GOGC or GOMEMLIMIT say otherwise, so that the floor collects no more
// often than the stages it stands for; it returns the function that
// restores the test's settings.
func runtimeGC() func() {
	percent, limit := -2, int64(-1) // unchanged
	if os.Getenv("GOGC") == "" {
		percent = debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit = debug.SetMemoryLimit(512 << 20)
	}
	return func() {
		if percent != -2 {
			debug.SetGCPercent(percent)
		}
		if limit >= 0 {
			debug.SetMemoryLimit(limit)
		}
	}
}

// profileTo writes a CPU profile of this process to the file that the
// environment variable env names, if any, until the function it returns
// is called: of the timed part of a benchmark alone (go test's -cpuprofile
// would also hold the deploying, ingesting and checking around it). The
// floor's is FOLDLINE_FLOOR_CPUPROFILE, the fused backfill's
// FOLDLINE_FUSED_CPUPROFILE (its stage processes are not in it).
func profileTo(b *testing.B, env string) func() {
	b.Helper()
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("creating %s: %v", env, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("profiling the floor: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("writing %s: %v", path, err)
		}
	}
}

// floorBatch is how many ledger events timeFloor hands from one goroutine
// to the next at once.
const floorBatch = 256

// floorTable is the table timeFloor writes.
const floorTable = "user_activity_floor"

// timeFloor rebuilds user_activity the way a backfill does, but in this
// one process: a reader of the ledger, the validate and user-activity
// transformations called directly (user-activity's view operations handed
// over unencoded, transform's ProcessOps), and the sink's batcher and applier
// writing a table of their own with the building table's batches, each on
// a goroutine of its own, batch by batch in ledger order. No topic is
// crossed. Its time is the floor of any backfill design on this machine:
// the same reads, transformations and Cassandra writes, nothing else. The
// table must equal the fold of the ledger, or the floor would be a fake.
// It also returns the CPU time each of pids used while the floor was
// timed: not while connecting, nor while the table is checked against the
// fold (which costs this process more than the floor itself).
func timeFloor(b *testing.B, s *shop, ledger string, n int, pids map[string]int) (time.Duration, map[string]time.Duration) {
	b.Helper()
	set, err := manifest.Load(s.opts.Dir)
	if err != nil {
		b.Fatalf("reading the manifests: %v", err)
	}
	set.Retarget(s.tenant, s.keyspace)
	view, err := set.ViewByName("user_activity")
	if err != nil {
		b.Fatal(err)
	}
	cfg := cassandra.Config{View: view.Schema(), Settings: cassandra.Settings{Hosts: []string{s.svc.CassandraHost}}.Defaults()}
	if cfg.Settings.Username, cfg.Settings.Password, err = s.svc.CassandraCredentials(); err != nil {
		b.Fatal(err)
	}
	cfg.View.Table = floorTable
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	applier, session, err := cassandra.Open(ctx, cfg)
	if err != nil {
		b.Fatalf("opening %s: %v", floorTable, err)
	}
	defer session.Close()
	defer applier.Close()
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		b.Fatalf("connecting to Pulsar: %v", err)
	}
	defer client.Close()

	stopProfile := profileTo(b, "FOLDLINE_FLOOR_CPUPROFILE")
	cpuBefore := cpuTimes(pids)
	start := time.Now()
	batcher := cassandra.NewBatcher(applier, cfg.Settings.BuildingCut(), cfg.Settings.Pipeline)
	go batcher.Run(ctx)
	reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: ledger, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 5000})
	if err != nil {
		b.Fatalf("reading %s: %v", ledger, err)
	}
	defer reader.Close()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure error
	)
	done := func(err error) {
		if err != nil {
			mu.Lock()
			failure = err
			mu.Unlock()
		}
		wg.Done()
	}
	// Three goroutines, each on a batch at a time, in the ledger's order:
	// the reader, validate, and user-activity with the sink's batcher (as
	// the fused engine's chain runs its functions), so that the process
	// keeps both cores busy, as the backfill's stages do.
	reads := make(chan []pulsar.Message, 4)
	valids := make(chan []transform.Record, 4)
	var readErr error
	go func() {
		defer close(reads)
		batch := make([]pulsar.Message, 0, floorBatch)
		for i := range n {
			msg, err := reader.Next(ctx)
			if err != nil {
				readErr = fmt.Errorf("reading %s: %w", ledger, err)
				return
			}
			batch = append(batch, msg)
			if len(batch) == floorBatch || i == n-1 {
				select {
				case reads <- batch:
				case <-ctx.Done():
					return
				}
				batch = make([]pulsar.Message, 0, floorBatch)
			}
		}
	}()
	go func() {
		defer close(valids)
		for msgs := range reads {
			valid := make([]transform.Record, 0, len(msgs))
			for _, msg := range msgs {
				id := msg.ID()
				origin := envelope.Origin{Topic: msg.Topic(), Position: envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}}
				recs, err := validate.Transformation.Process(transform.Message{Key: msg.Key(), EventTime: msg.EventTime(), Payload: msg.Payload(), Origin: origin})
				if err != nil {
					continue // a malformed line: the deployed path dead-letters it
				}
				valid = append(valid, recs...)
			}
			select {
			case valids <- valid:
			case <-ctx.Done():
				return
			}
		}
	}()
	for valid := range valids {
		for _, v := range valid {
			// The view operations come as they are, not encoded to be
			// decoded again (ProcessOps): no topic is crossed.
			ops, err := useractivity.Transformation.ProcessOps(transform.Message{Key: v.Key, EventTime: v.EventTime, Payload: v.Payload, Origin: v.Origin})
			if err != nil {
				b.Fatalf("user-activity refused a valid event: %v", err)
			}
			for _, o := range ops {
				if o.Op == nil {
					b.Fatalf("user-activity emitted a record, not a view operation: %s", o.Payload)
				}
				wg.Add(1)
				if err := batcher.SubmitAsync(ctx, cassandra.Op{View: *o.Op, Origin: o.Origin}, done); err != nil {
					b.Fatalf("submitting a view operation: %v", err)
				}
			}
		}
	}
	if readErr != nil {
		b.Fatal(readErr)
	}
	batcher.Flush() // the end of the ledger: the last batch need not linger
	wg.Wait()
	took := time.Since(start)
	cpu := cpuSince(pids, cpuBefore)
	stopProfile()
	if failure != nil {
		b.Fatalf("applying view operations: %v", failure)
	}
	got, err := s.userActivity(floorTable)
	if err != nil {
		b.Fatal(err)
	}
	if want := s.expected().UserActivity; !maps.Equal(got, want) {
		b.Fatalf("the in-process fold differs from the independent fold: %d rows against %d", len(got), len(want))
	}
	return took, cpu
}
