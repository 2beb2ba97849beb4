package localrun

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"os"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/pf/localwire"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// shopEvents are n generated shop events (2 % malformed) as ledger events.
func shopEvents(t testing.TB, n int) []Message {
	t.Helper()
	var lines bytes.Buffer
	if _, err := gen.Generate(&lines, gen.Options{Events: n, Users: 50, Malformed: 0.02, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	const ledger = "persistent://shop/ledger/events"
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	var events []Message
	for i, line := range bytes.Split(bytes.TrimSpace(lines.Bytes()), []byte("\n")) {
		events = append(events, Message{Topic: ledger, Ledger: 3, Entry: int64(i / 100), Batch: int64(i % 100),
			Key: fmt.Sprint("k", i%7), Payload: line, Properties: map[string]string{"app": "x"},
			EventTime: at.Add(time.Duration(i) * time.Millisecond), PublishTime: at.Add(time.Duration(i) * time.Millisecond)})
	}
	return events
}

// shopPath returns the shop's user_activity path.
func shopPath(t testing.TB) []*manifest.Stage {
	t.Helper()
	set, err := manifest.Load(testenv.ShopManifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	graph, problems := set.Graph()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return graph.PathTo("user_activity")
}

// startShopPath starts the shop's user_activity path.
func startShopPath(t testing.TB) *Pipeline {
	t.Helper()
	p, err := StartPath(t.Context(), shopPath(t), &gobuild.Builder{Dir: gobuild.ModuleDir(".")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Closing a path whose run ended early (an error downstream) ends its
// functions even while they are blocked writing outputs nobody reads.
func TestCloseEndsAFunctionBlockedOnItsOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shop's functions")
	}
	events := shopEvents(t, 9000)
	for _, chain := range []string{"on", "off"} {
		t.Setenv(ChainEnv, chain)
		p := startShopPath(t)
		s := p.stages[0]
		go s.send(events, s.number(len(events))) // and nothing reads the outputs
		time.Sleep(500 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		select {
		case <-closed: // an error or none: the function is gone
		case <-time.After(20 * time.Second):
			t.Fatalf("chain %s: Close still waits after 20 s", chain)
		}
	}
}

// pathRun is what a local run of a path gave: the view operations in the
// order they came, the dead letters handed over, and the count per stage.
type pathRun struct {
	ops         []cassandra.Op
	letters     []string
	deadLetters map[string]int64
	processes   int
	// states are what the stateful dedup exported at the end.
	states map[string]map[string]keyed.Snapshot
}

// runShopPath runs the shop's user_activity path over events in batches
// of batch, streamed.
func runShopPath(t *testing.T, events []Message, batch int) pathRun {
	t.Helper()
	return runPath(t, startShopPath(t), events, batch)
}

// runPath is runShopPath on p, which it closes.
func runPath(t *testing.T, p *Pipeline, events []Message, batch int) pathRun {
	t.Helper()
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	var run pathRun
	run.processes = len(p.stages)
	p.OnDeadLetter = func(o *localwire.Output, origin envelope.Origin) error {
		run.letters = append(run.letters, fmt.Sprintf("%s %s %q %v", o.Topic, origin, o.Payload, o.Properties))
		return nil
	}
	err := p.Stream(t.Context(), batchesOf(events, batch), func([]Message) {}, func(op cassandra.Op, _ Message) error {
		run.ops = append(run.ops, op)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run.deadLetters = maps.Clone(p.DeadLetters)
	if run.states, err = p.ExportStates(); err != nil {
		t.Fatal(err)
	}
	if len(run.letters) != int(sum(run.deadLetters)) {
		t.Errorf("exporting the states made dead letters: %d handed over, %v counted", len(run.letters), run.deadLetters)
	}
	return run
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// batchesOf hands events over in batches of size, as a ledger reader does.
func batchesOf(events []Message, size int) iter.Seq2[[]Message, error] {
	return func(yield func([]Message, error) bool) {
		for i := 0; i < len(events); i += size {
			if !yield(events[i:min(i+size, len(events))], nil) {
				return
			}
		}
	}
}

// The shop's dedup, validate and user-activity run as one chain process,
// and give the view operations, dead letters and dedup's states at the
// end, in the same order, that they give as a process each — over batches far larger than a pipe holds,
// which a driver must read the outputs of while it writes them.
func TestChainGivesWhatProcessesGive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shop's functions")
	}
	events := shopEvents(t, 9000)
	chained := runShopPath(t, events, 3000)
	t.Setenv(ChainEnv, "off")
	separate := runShopPath(t, events, 3000)

	if chained.processes != 1 || separate.processes != 3 {
		t.Fatalf("processes: chained %d, separate %d; want 1 and 3", chained.processes, separate.processes)
	}
	// Every event folded once into the state of its key's bucket of ids
	// (the events' keys are k0…k6; a state key is dedup.StateKey's: the
	// message key, '#' and the bucket in three hex digits).
	folded := int64(0)
	keys := map[string]bool{}
	for key, snap := range chained.states["dedup"] {
		folded += snap.Applied
		keys[key[:max(0, len(key)-4)]] = true
	}
	if len(keys) != 7 || folded != int64(len(events)) || !reflect.DeepEqual(chained.states, separate.states) {
		t.Errorf("dedup's states: %d message keys in %d states chained (%d events folded), %d states separate, equal %v; want 7 keys, %d events", len(keys), len(chained.states["dedup"]), folded, len(separate.states["dedup"]), reflect.DeepEqual(chained.states, separate.states), len(events))
	}
	if len(chained.ops) < 8000 || len(chained.letters) < 100 {
		t.Fatalf("the run covers too little: %d operations, %d dead letters", len(chained.ops), len(chained.letters))
	}
	if !reflect.DeepEqual(chained.deadLetters, separate.deadLetters) {
		t.Errorf("dead letters per function: chained %v, separate %v", chained.deadLetters, separate.deadLetters)
	}
	if !slices.Equal(chained.letters, separate.letters) {
		t.Errorf("dead letters differ: chained %d, separate %d", len(chained.letters), len(separate.letters))
	}
	if len(chained.ops) != len(separate.ops) {
		t.Fatalf("operations: chained %d, separate %d", len(chained.ops), len(separate.ops))
	}
	for i := range chained.ops {
		if !reflect.DeepEqual(chained.ops[i], separate.ops[i]) {
			t.Fatalf("operation %d: chained %+v, separate %+v", i, chained.ops[i], separate.ops[i])
		}
	}
}

// A backfill's runner (BuildRunner), run as the path's chain
// (StartPathChained, as the runner runs itself on the worker), gives what
// the path gives as StartPath runs it: the same operations, dead letters
// and states. A path whose functions do not each read the one before is
// refused.
func TestRunnerRunsThePath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shop's functions")
	}
	events := shopEvents(t, 6000)
	want := runShopPath(t, events, 2000)
	path := shopPath(t)
	host := gobuild.Platform{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	bin, err := BuildRunner(t.Context(), path, &gobuild.Builder{Dir: gobuild.ModuleDir("."), Platform: host})
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartPathChained(t.Context(), path, bin, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := runPath(t, p, events, 2000)
	if len(got.ops) < 4000 || len(got.letters) < 50 {
		t.Fatalf("the run covers too little: %d operations, %d dead letters", len(got.ops), len(got.letters))
	}
	if !reflect.DeepEqual(got.ops, want.ops) || !slices.Equal(got.letters, want.letters) || !reflect.DeepEqual(got.states, want.states) {
		t.Errorf("the runner's chain gave %d operations, %d dead letters, %d dedup states; the path %d, %d, %d (equal: %v %v %v)",
			len(got.ops), len(got.letters), len(got.states["dedup"]), len(want.ops), len(want.letters), len(want.states["dedup"]),
			reflect.DeepEqual(got.ops, want.ops), slices.Equal(got.letters, want.letters), reflect.DeepEqual(got.states, want.states))
	}
	gap := []*manifest.Stage{path[0], path[2], path[3]} // validate left out
	if _, err := StartPathChained(t.Context(), gap, bin, nil, nil); !errors.Is(err, ErrNotChained) {
		t.Errorf("a path with a gap: %v, want ErrNotChained", err)
	}
}

// BenchmarkLocalPath is the fused engine's work without a cluster: the
// shop's user_activity path (validate and user-activity chained in one
// process, as `foldline backfill --engine fused` runs them) over
// FOLDLINE_BENCH_EVENTS generated events (default 200 000) in batches of
// 2000, streamed, each view operation decoded with its origin as the sink
// gets it. cpu-µs/event is this process's CPU and the path's (its
// processes, once they have exited), per event, from the path's start on
// (its build not included); with ChainEnv=off, a process per function.
//
//	go test -run '^$' -bench LocalPath -benchtime 1x ./admin/internal/localrun/
func BenchmarkLocalPath(b *testing.B) {
	n := testenv.EnvInt(b, "FOLDLINE_BENCH_EVENTS", 200_000)
	events := shopEvents(b, n)
	for b.Loop() {
		// Started (and so built: the go command's CPU, which waiting for
		// it adds to this process's children's) before the clock.
		b.StopTimer()
		p := startShopPath(b)
		before := proc.CPUTimeWithChildren(os.Getpid())
		b.StartTimer()
		ops := 0
		err := p.Stream(b.Context(), batchesOf(events, 2000), func([]Message) {}, func(cassandra.Op, Message) error {
			ops++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		if ops < n/2 {
			b.Fatalf("%d view operations from %d events", ops, n)
		}
		b.ReportMetric(float64((proc.CPUTimeWithChildren(os.Getpid())-before).Microseconds())/float64(n), "cpu-µs/event")
	}
}

// A run stopped after a checkpoint (ExportMarkers streamed part-way, the
// states handed to OnExport) and resumed by another from those states
// (ImportStates), reading again from the checkpoint's entry, gives what one
// run gives: the operations of every event after the checkpoint once
// (dedup, first in the path, skips the events its states folded), and the
// same states at the end. Chained and a process per function.
func TestResumedRunGivesWhatOneRunGives(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shop's functions")
	}
	events := shopEvents(t, 9000)
	for _, chain := range []string{"on", "off"} {
		t.Run("chain "+chain, func(t *testing.T) {
			t.Setenv(ChainEnv, chain)
			whole := runShopPath(t, events, 1000)
			const checkpoint, killedAt, entryStart = 3000, 4500, 2900 // entry 29 holds events 2900…2999

			first := startShopPath(t)
			defer first.Close()
			var saved Exported
			first.OnExport = func(states Exported) error {
				if saved != nil {
					t.Error("states exported twice")
				}
				saved = states
				return nil
			}
			var firstOps []cassandra.Op
			batches := func(yield func([]Message, error) bool) {
				for i := 0; i < killedAt; i += 1000 {
					if !yield(events[i:i+1000], nil) {
						return
					}
					if i+1000 == checkpoint && !yield(first.ExportMarkers(), nil) {
						return
					}
				}
			}
			if err := first.Stream(t.Context(), batches, func([]Message) {}, func(op cassandra.Op, _ Message) error {
				firstOps = append(firstOps, op)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if saved == nil || len(saved["dedup"]) == 0 {
				t.Fatalf("the checkpoint exported no states of dedup: %v", saved)
			}
			cut := events[checkpoint-1]
			after := func(op cassandra.Op) bool {
				p := op.Origin.Position
				return p.Ledger > cut.Ledger || p.Ledger == cut.Ledger && (p.Entry > cut.Entry || p.Entry == cut.Entry && int64(p.Batch) > cut.Batch)
			}
			var wantAfter []cassandra.Op
			for i, op := range whole.ops {
				if after(op) {
					wantAfter = whole.ops[i:]
					if !reflect.DeepEqual(firstOps[:i], whole.ops[:i]) {
						t.Errorf("the first run's operations before the checkpoint differ from one run's")
					}
					break
				}
			}

			second := startShopPath(t)
			defer second.Close()
			if err := second.ImportStates(saved); err != nil {
				t.Fatal(err)
			}
			var secondOps []cassandra.Op
			if err := second.Stream(t.Context(), batchesOf(events[entryStart:], 1000), func([]Message) {}, func(op cassandra.Op, _ Message) error {
				secondOps = append(secondOps, op)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(secondOps) != len(wantAfter) {
				t.Fatalf("the resumed run gave %d operations, one run %d after the checkpoint", len(secondOps), len(wantAfter))
			}
			for i := range secondOps {
				if !reflect.DeepEqual(secondOps[i], wantAfter[i]) {
					t.Fatalf("operation %d after the checkpoint: resumed %+v, one run %+v", i, secondOps[i], wantAfter[i])
				}
			}
			changed, err := second.ExportStates()
			if err != nil {
				t.Fatal(err)
			}
			final := map[string]keyed.Snapshot{}
			maps.Copy(final, saved["dedup"])
			maps.Copy(final, changed["dedup"])
			if !reflect.DeepEqual(final, whole.states["dedup"]) {
				t.Errorf("dedup's states at the end: resumed (%d keys saved, %d changed after) differ from one run's (%d keys)", len(saved["dedup"]), len(changed["dedup"]), len(whole.states["dedup"]))
			}
		})
	}
}
