package cassandra

import (
	"bytes"
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
)

// BenchmarkFloorPath is Foldline's own CPU per ledger event on the
// backfill floor (admin/e2e's foldInProcess) without a cluster: validate,
// user-activity, decoding the view operation, and the applier's bind,
// coalesce, fold, diff and row statement, in batches of the building
// table's size, over the e2e ledger's kind of events (300 users, 40 skus,
// 1% malformed), handed to the applier through a Batcher as foldInProcess
// does. One op is one ledger event. Pulsar's reader and gocql's
// marshalling are not in it: they are the libraries' CPU, not ours.
//
// cpu-µs/event is the process's CPU time (getrusage, garbage collection
// included), which other processes on the machine do not inflate as they
// inflate ns/op. The sub-benchmarks time each stage alone.
//
//	go test -run '^$' -bench FloorPath -benchmem ./sinks/cassandra/
func BenchmarkFloorPath(b *testing.B) {
	ledger := floorLedger(b)
	schema := userActivitySchema("shop", "user_activity")
	b.Run("path", func(b *testing.B) {
		f := newFloorFold(b, schema)
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		batcher := NewBatcher(f, f.a.settings.BuildingCut(), f.a.settings.Pipeline)
		go batcher.Run(ctx)
		var wg sync.WaitGroup
		done := func(err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		}
		cpu := startCPU(b)
		for i := 0; b.Loop(); i++ {
			m := ledger.message(i)
			valid, err := validate.Transformation.Process(m)
			if err != nil {
				continue // dead-lettered
			}
			for _, v := range valid {
				recs, err := useractivity.Transformation.Process(transform.Message{Key: v.Key, EventTime: v.EventTime, Payload: v.Payload, Origin: v.Origin})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					op, err := envelope.DecodeRowOp(r.Payload)
					if err != nil {
						b.Fatal(err)
					}
					wg.Add(1)
					if err := batcher.SubmitAsync(ctx, Op{View: op, Origin: r.Origin}, done); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		batcher.Flush()
		wg.Wait()
		cpu.report()
	})

	valid := ledger.valid(b)
	b.Run("validate", func(b *testing.B) {
		cpu := startCPU(b)
		for i := 0; b.Loop(); i++ {
			_, _ = validate.Transformation.Process(ledger.message(i))
		}
		cpu.report()
	})
	b.Run("user-activity", func(b *testing.B) {
		cpu := startCPU(b)
		for i := 0; b.Loop(); i++ {
			if _, err := useractivity.Transformation.Process(valid[i%len(valid)]); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report()
	})
	payloads := viewOpPayloads(b, valid)
	b.Run("decode", func(b *testing.B) {
		cpu := startCPU(b)
		for i := 0; b.Loop(); i++ {
			if _, err := envelope.DecodeRowOp(payloads[i%len(payloads)]); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report()
	})
	b.Run("fold", func(b *testing.B) {
		ops := make([]Op, len(payloads))
		for i, p := range payloads {
			op, err := envelope.DecodeRowOp(p)
			if err != nil {
				b.Fatal(err)
			}
			ops[i] = Op{View: op}
		}
		f := newFloorFold(b, schema)
		cpu := startCPU(b)
		for i := 0; b.Loop(); i++ {
			op := ops[i%len(ops)]
			op.Origin = envelope.Origin{Topic: floorTopic, Position: envelope.Position{Ledger: 1, Entry: int64(i)}}
			f.add(op)
		}
		f.flush()
		cpu.report()
	})
}

// floorTopic is the ledger partition the floor's events come from.
const floorTopic = "persistent://shop/ledger/events"

// floorEvents is the number of distinct ledger events the benchmark cycles
// through; their positions keep growing, so every lap folds anew.
const floorEvents = 50_000

// shopLedger is a generated ledger, one event per line.
type shopLedger [][]byte

func floorLedger(b *testing.B) shopLedger {
	b.Helper()
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: floorEvents, Users: 300, SKUs: 40, Seed: 31, Malformed: 0.01}); err != nil {
		b.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// message is the i-th event read from the ledger, as foldInProcess hands it
// to validate.
func (l shopLedger) message(i int) transform.Message {
	return transform.Message{
		Payload: l[i%len(l)],
		Origin:  envelope.Origin{Topic: floorTopic, Position: envelope.Position{Ledger: 1, Entry: int64(i)}},
	}
}

// valid returns the ledger's valid events as validate outputs them.
func (l shopLedger) valid(b *testing.B) []transform.Message {
	b.Helper()
	var out []transform.Message
	for i := range l {
		recs, err := validate.Transformation.Process(l.message(i))
		if err != nil {
			continue
		}
		for _, r := range recs {
			out = append(out, transform.Message{Key: r.Key, EventTime: r.EventTime, Payload: r.Payload, Origin: r.Origin})
		}
	}
	return out
}

func viewOpPayloads(b *testing.B, valid []transform.Message) [][]byte {
	b.Helper()
	var out [][]byte
	for _, m := range valid {
		recs, err := useractivity.Transformation.Process(m)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, r.Payload)
		}
	}
	return out
}

// floorFold is the applier's own work on a building table without its
// Cassandra requests: batches bound and grouped by Start's code, rows
// folded, diffed and turned into their UPDATE's arguments by the workers'
// code, the rows kept in the applier's row cache. A row the cache does not
// hold is new, as every row of a building table is at first.
type floorFold struct {
	b     *testing.B
	a     *Applier
	batch []Op
	size  int
}

func newFloorFold(b *testing.B, schema ViewSchema) *floorFold {
	b.Helper()
	settings := Settings{}.Defaults()
	view, err := compileView(schema, settings.MaxValueBytes)
	if err != nil {
		b.Fatal(err)
	}
	a := &Applier{view: view, settings: settings, cache: newRowCache(settings.cacheRows())}
	a.selectCQL, a.appendCQL, a.replaceCQL = statements(schema)
	size := settings.BuildingCut().Size
	return &floorFold{b: b, a: a, batch: make([]Op, 0, size), size: size}
}

func (f *floorFold) add(op Op) {
	f.batch = append(f.batch, op)
	if len(f.batch) == f.size {
		f.flush()
	}
}

func (f *floorFold) flush() {
	f.apply(f.batch)
	clear(f.batch)
	f.batch = f.batch[:0]
}

// Start applies ops at once, as the Batcher's BatchStarter.
func (f *floorFold) Start(_ context.Context, ops []Op) *Pending { return f.apply(ops) }

func (f *floorFold) apply(ops []Op) *Pending {
	ctx := context.Background()
	p, groups := f.a.group(ops)
	for _, g := range groups {
		if !f.a.cache.has(g.rowKey) {
			g.before = newRowState(len(f.a.view.colTypes))
		}
		u := f.a.foldRow(ctx, []*rowJob{{ctx: ctx, group: g, batch: p}})
		if u == nil {
			continue
		}
		_, _ = f.a.rowStatement(g.key, u.after, u.write)
		f.a.finishRow(u, nil)
	}
	for i, err := range p.res.Errs {
		if err != nil {
			f.b.Errorf("operation %d: %v", i, err)
		}
	}
	return p
}

// cpuMeter reports a benchmark's process CPU time per op.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuMeter {
	b.ReportAllocs()
	return cpuMeter{b: b, start: processCPU(b)}
}

func (m cpuMeter) report() {
	m.b.ReportMetric(float64(processCPU(m.b)-m.start)/float64(time.Microsecond)/float64(m.b.N), "cpu-µs/event")
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("reading the process's CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
