package e2e

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/testenv"
)

// BenchmarkBackfillVsReader measures, in one run, a backfill of the shop's
// user_activity view (three topics crossed per event: ledger → validate →
// user-activity → sink → Cassandra) over a ledger of N events against the
// time a plain pulsar-client-go reader needs just to read the same ledger,
// and prints both as a table, with the same backfill run by the fused
// engine twice more: the path's transformations chained in one process,
// and every function in a process of its own (localrun.ChainEnv=off);
// then killed at half and resumed, once more on the cluster
// (--engine cluster: the same run by the functions worker), and last with
// validate's config changed, dedup shared (the path the fused aim was set
// on, before dedup joined the shop), which reads dedup's output instead of
// the ledger: it is measured against a plain read of that topic too. N
// is FOLDLINE_BENCH_EVENTS (default 200000;
// the figure is 1000000); with FOLDLINE_BENCH_JSON set, the
// backfill's times against the reader's go there too (internal/benchreport).
// The live pipeline has caught up before either is timed, so neither
// competes with it for the CPU, and every binary either engine runs is
// built before the clock (prebuildChain).
//
//	go test ./admin/e2e -run '^$' -bench BackfillVsReader -benchtime 1x -timeout 60m
func BenchmarkBackfillVsReader(b *testing.B) {
	s, n, ledger := deployBenchLedger(b, "bfbench")

	for b.Loop() {
		readTime, _ := readBest(b, s.svc, ledger, n, nil)
		services := map[string]int{"pulsar": testenv.ServicePID(b, "pulsar"), "cassandra": testenv.ServicePID(b, "cassandra")}

		opts := s.backfillOptions("user_activity", s.opts.Dir)
		opts.Timeout = 60 * time.Minute
		// Each run's old path stops at its switch, as before rollback
		// graces: the next run is timed without it running alongside.
		opts.Grace, opts.GraceSet = 0, true
		// The whole path from the ledger, as before backfills shared the
		// stages that did not change (a replay of an unchanged view would
		// copy only its sink).
		opts.CopyAll = true
		prebuildChain(b, opts)
		// Per-stage progress every 5 s, each line with the time since the
		// backfill started: where the time goes.
		opts.ErrOut = &sinceWriter{w: os.Stderr, start: time.Now()}
		opts.Engine = backfill.EngineDeployed
		cpuBefore := cpuTimes(services)
		machineBefore := machineBusy()
		start := time.Now()
		rec, err := backfill.Start(b.Context(), opts)
		if err != nil {
			b.Fatalf("starting the backfill: %v", err)
		}
		deployed := time.Now()
		instances := map[string][]int{}
		for _, st := range rec.Stages {
			instances[st.Name] = testenv.InstancePIDs(b, st.Tenant, st.Namespace, st.Name)
		}
		res, err := backfill.Run(b.Context(), opts, true)
		if err != nil {
			b.Fatalf("backfilling: %v", err)
		}
		total := time.Since(start)
		toSwitch := res.SwitchedAt.Sub(start)
		machine := machineBusy() - machineBefore
		cpu := cpuSince(services, cpuBefore)
		for name, pids := range instances {
			for _, pid := range pids {
				cpu[name] += proc.CPUTime(pid) // started by the backfill
			}
		}
		if res.Diff == nil || !res.Diff.Identical() {
			b.Fatalf("the replay differs: %v", res.Diff)
		}
		// The same backfill again (into the next version), fused: the
		// path on this machine over the ledger, then deployed from there;
		// then once more with every function in a process of its own
		// instead of the path's transformations chained in one.
		opts.Engine = backfill.EngineFused
		fused := func(profileEnv string) (toSwitch, total time.Duration, cpu map[string]time.Duration, machine time.Duration) {
			cpuBefore := cpuTimes(services)
			machineBefore := machineBusy()
			selfBefore := proc.CPUTimeWithChildren(os.Getpid())
			start := time.Now()
			opts.ErrOut = &sinceWriter{w: os.Stderr, start: start}
			stopProfile := profileTo(b, profileEnv)
			res, err := backfill.Run(b.Context(), opts, false)
			stopProfile()
			if err != nil {
				b.Fatalf("backfilling with the fused engine: %v", err)
			}
			total = time.Since(start)
			toSwitch = res.SwitchedAt.Sub(start)
			machine = machineBusy() - machineBefore
			cpu = cpuSince(services, cpuBefore)
			cpu["this process and its stages (fused)"] = proc.CPUTimeWithChildren(os.Getpid()) - selfBefore
			if res.Diff == nil || !res.Diff.Identical() {
				b.Fatalf("the fused replay differs: %v", res.Diff)
			}
			return toSwitch, total, cpu, machine
		}
		fusedSwitch, fusedTotal, fusedCPU, fusedMachine := fused("FOLDLINE_FUSED_CPUPROFILE")
		b.Setenv(localrun.ChainEnv, "off")
		separateSwitch, separateTotal, separateCPU, separateMachine := fused("")
		b.Setenv(localrun.ChainEnv, "")
		// Once more fused, its CLI killed (SIGKILL) once half the ledger
		// is written, then run again: it resumes from the checkpoint.
		killedRun, resumedRun := s.killedFusedRun(b, opts, int64(n/2))
		// Once more on the cluster: the same fused run, by the functions
		// worker as the backfill's runner (built before the clock, as the
		// chain is).
		clusterSwitch := s.clusterRun(b, opts)
		// Last, like for like with the path the fused aim was set on,
		// before dedup joined the shop: validate's config changed, so the
		// backfill copies validate → user-activity → sink and reads dedup's
		// kept output (dedup shared, not run again).
		likeSwitch := likeForLikeRun(b, opts)
		// What that run reads instead of the ledger: dedup's output, as
		// the live pipeline wrote it (its batches closed by the stage's
		// 10 ms publish delay, not full as the ingested ledger's are).
		shared := "persistent://" + s.tenant + "/pipeline/distinct"
		sharedRead, _ := readBest(b, s.svc, shared, -1, nil)

		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "events\twhat\ttime\tevents/s\tvs reader\t\n")
		row := func(what string, d time.Duration) {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.2f×\t\n", n, what, d.Round(10*time.Millisecond), float64(n)/d.Seconds(), d.Seconds()/readTime.Seconds())
		}
		row("plain reader, ledger only", readTime)
		row("backfill, deploy to switch", toSwitch)
		row("backfill, without deploying", toSwitch-deployed.Sub(start))
		row("backfill, deploy to done", total)
		row("fused backfill, start to switch", fusedSwitch)
		row("fused backfill, start to done", fusedTotal)
		row("fused, one process per function", separateSwitch)
		row("fused, killed at half: the resumed run, to switch", resumedRun)
		row("fused, killed at half: both runs, to switch", killedRun+resumedRun)
		row("cluster backfill, start to switch", clusterSwitch)
		row("fused, validate changed (dedup shared), to switch", likeSwitch)
		tw.Flush()
		fmt.Printf("plain reader of dedup's output (what the last run reads) %s: the last run took %.2f× that\n",
			sharedRead.Round(10*time.Millisecond), likeSwitch.Seconds()/sharedRead.Seconds())
		printCPU(cpu, total, machine)
		printCPU(fusedCPU, fusedTotal, fusedMachine)
		printCPU(separateCPU, separateTotal, separateMachine)
		reader := fmt.Sprintf("plain reader of %d events", n)
		seconds := func(figure string, d time.Duration) benchreport.Figure {
			return benchreport.Figure{Bench: "backfill", Figure: figure, Value: d.Seconds(), Unit: "s"}.Against(reader, readTime.Seconds())
		}
		if err := benchreport.Emit(
			seconds("backfill, deploy to switch", toSwitch).Aiming(backfillAim),
			seconds("backfill, without deploying", toSwitch-deployed.Sub(start)),
			seconds("backfill, deploy to done", total),
			seconds("fused backfill, start to switch", fusedSwitch).Aiming(fusedAim),
			seconds("fused backfill, start to done", fusedTotal),
			seconds("fused, one process per function", separateSwitch),
			seconds("fused, killed at half: the resumed run, to switch", resumedRun).Against("fused backfill, start to switch", fusedSwitch.Seconds()),
			seconds("fused, killed at half: both runs, to switch", killedRun+resumedRun).Against("fused backfill, start to switch", fusedSwitch.Seconds()),
			seconds("cluster backfill, start to switch", clusterSwitch).Against("fused backfill, start to switch", fusedSwitch.Seconds()),
			seconds("fused, validate changed (dedup shared), to switch", likeSwitch).Aiming(fusedAim),
			benchreport.Figure{Bench: "backfill", Figure: "fused, validate changed (dedup shared), against what it reads", Value: likeSwitch.Seconds(), Unit: "s"}.
				Against("plain reader of dedup's output", sharedRead.Seconds()),
		); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(toSwitch.Seconds()/readTime.Seconds(), "backfill/read")
		b.ReportMetric(float64(n)/toSwitch.Seconds(), "events/s")
	}
}

// killedFusedRun runs a fused backfill of user_activity with the CLI
// (foldline backfill in a process of its own), kills it (SIGKILL) once its
// checkpoint covers at least events ledger events, waits until its
// heartbeat has stopped (not timed), and runs the backfill again, which
// resumes from the checkpoint. It returns the time from the first start to
// the kill and the time from the second start to the switch.
func (s *shop) killedFusedRun(b *testing.B, opts backfill.Options, events int64) (killed, resumed time.Duration) {
	b.Helper()
	start := time.Now()
	cli := s.startBackfillCLI(b, "user_activity", s.opts.Dir, "--engine", "fused", "--grace", "0s", "--checkpoint", "500ms", "--copy-all")
	rec := s.killAtCheckpoint(b, cli, "user_activity", events)
	killed = time.Since(start)
	fmt.Fprintf(os.Stderr, "killed foldline backfill after %s with %d ledger events written\n", killed.Round(10*time.Millisecond), rec.Fused.Events)
	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	testenv.WaitFor(b, time.Minute, "the killed run's heartbeat stopped", func() bool {
		r, err := store.Unfinished(b.Context(), "user_activity")
		return err == nil && r != nil && r.FusedStalled(time.Now())
	})
	opts.Engine = backfill.EngineFused
	return killed, timedToSwitch(b, opts, "resuming the killed fused backfill")
}

// timedToSwitch runs the backfill of opts (what says which), checks that
// its table is identical to the old one, and returns the time from its
// start to the switch.
func timedToSwitch(b *testing.B, opts backfill.Options, what string) time.Duration {
	b.Helper()
	start := time.Now()
	opts.ErrOut = &sinceWriter{w: os.Stderr, start: start}
	res, err := backfill.Run(b.Context(), opts, false)
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	if res.Diff == nil || !res.Diff.Identical() {
		b.Fatalf("%s: the table differs: %v", what, res.Diff)
	}
	return res.SwitchedAt.Sub(start)
}

// clusterRun runs the backfill of opts (its path copied whole) on the
// cluster (--engine cluster), its runner built before the clock, and
// returns the time from its start to the switch.
func (s *shop) clusterRun(b *testing.B, opts backfill.Options) time.Duration {
	b.Helper()
	opts.Engine = backfill.EngineCluster
	if _, err := localrun.BuildRunner(b.Context(), benchPath(b, opts), opts.NewBuilder()); err != nil {
		b.Fatalf("building the runner: %v", err)
	}
	return timedToSwitch(b, opts, "backfilling on the cluster")
}

// likeForLikeRun runs the fused backfill of opts with validate's config
// changed (a user config key its code ignores) in a copy of the shop's
// manifests, sharing what did not change, and returns the time from its
// start to the switch.
func likeForLikeRun(b *testing.B, opts backfill.Options) time.Duration {
	b.Helper()
	opts.Dir = testenv.ShopManifests(b)
	editFile(b, filepath.Join(opts.Dir, "functions", "validate.yaml"), "  maxRetries: 3\n", "  maxRetries: 3\n  benchRun: like-for-like\n")
	opts.Engine, opts.CopyAll = backfill.EngineFused, false
	// Its chain, built before the clock as the other runs' is, holds the
	// path without dedup.
	localrun.PrepareChain(b.Context(), benchPath(b, opts)[1:], opts.NewBuilder())
	return timedToSwitch(b, opts, "backfilling with validate changed")
}

// prebuildChain builds, before the clock, the binary the fused engine runs
// the path's transformations with, as the shop's deploy built the binaries
// both engines deploy: the first fused backfill after a change to the code
// links it (about a second), later ones find it built.
func prebuildChain(b *testing.B, opts backfill.Options) {
	b.Helper()
	localrun.PrepareChain(b.Context(), benchPath(b, opts), opts.NewBuilder())
}

// benchPath returns the path of user_activity in the manifests of opts.
func benchPath(b *testing.B, opts backfill.Options) []*manifest.Stage {
	b.Helper()
	set, err := manifest.Load(opts.Dir)
	if err != nil {
		b.Fatalf("reading the manifests: %v", err)
	}
	graph, problems := set.Graph()
	if len(problems) > 0 {
		b.Fatalf("the manifests: %v", problems)
	}
	return graph.PathTo("user_activity")
}

// deployBenchLedger deploys the shop as tenant name, ingests
// FOLDLINE_BENCH_EVENTS (default 200000) generated events in chunks of
// 100 000, and waits until the live pipeline has folded them all, so that
// nothing competes with what a benchmark times next. It returns the shop,
// the number of events and the ledger topic.
func deployBenchLedger(b *testing.B, name string) (*shop, int, string) {
	b.Helper()
	n := testenv.EnvInt(b, "FOLDLINE_BENCH_EVENTS", 200_000)
	s := deployShop(b, name)
	events := generate(b, n, 31)
	for i := 0; i < n; i += 100_000 {
		s.ingest(b, events[i:min(i+100_000, n)])
	}
	s.waitForFold(b, 60*time.Minute)
	return s, n, "persistent://" + s.tenant + "/ledger/events"
}

// backfillAim is issue 15's aim for a backfill against a plain read of
// the same ledger.
const backfillAim = "<= 8x"

// fusedAim is issue 44's aim for the fused engine against a plain read of
// the same ledger of 1 000 000 events: tighter than backfillAim, which the
// deployed engine keeps.
const fusedAim = "<= 5x"

// readBest reads topic from its first message until n messages have come
// (every message it holds, for n < 0), readRounds times, and returns the
// shortest time and the CPU that pids used in that read: the limit the benchmarks divide by is the best read
// the machine gave in the run, not one read that may have been slow (reads
// of the same ledger on the shared machine differ by up to half). It prints
// every read's time.
func readBest(b *testing.B, svc testenv.Services, topic string, n int, pids map[string]int) (time.Duration, map[string]time.Duration) {
	b.Helper()
	client, err := pulsar.NewClient(svc.PulsarClientOptions())
	if err != nil {
		b.Fatalf("connecting to Pulsar: %v", err)
	}
	defer client.Close()
	var (
		best    time.Duration
		bestCPU map[string]time.Duration
		times   []string
		read    int
	)
	for range readRounds {
		before := cpuTimes(pids)
		var d time.Duration
		d, read = testenv.TimeRead(b, client, topic, n)
		cpu := cpuSince(pids, before)
		times = append(times, d.Round(10*time.Millisecond).String())
		if best == 0 || d < best {
			best, bestCPU = d, cpu
		}
	}
	fmt.Printf("plain reads of %d events of %s: %s; the best, %s, is the limit\n", read, topic, strings.Join(times, ", "), best.Round(10*time.Millisecond))
	return best, bestCPU
}

// readRounds is how many times readBest reads the ledger.
const readRounds = 3

// cpuTimes reads the CPU time each process has used so far.
func cpuTimes(pids map[string]int) map[string]time.Duration {
	cpu := make(map[string]time.Duration, len(pids))
	for name, pid := range pids {
		cpu[name] = proc.CPUTime(pid)
	}
	return cpu
}

// cpuSince returns the CPU time each process has used since before.
func cpuSince(pids map[string]int, before map[string]time.Duration) map[string]time.Duration {
	cpu := cpuTimes(pids)
	for name := range cpu {
		cpu[name] -= before[name]
	}
	return cpu
}

// printCPU prints the CPU time each process used during a backfill, busiest
// first, and what the machine's cores used besides (machine, from
// /proc/stat, less theirs): where the two cores went while the view was
// rebuilt.
func printCPU(cpu map[string]time.Duration, wall, machine time.Duration) {
	var sum time.Duration
	for _, d := range cpu {
		sum += d
	}
	if machine > sum {
		cpu = maps.Clone(cpu)
		cpu[restOfMachine] = machine - sum
		sum = machine
	}
	names := slices.Collect(maps.Keys(cpu))
	sort.Slice(names, func(i, j int) bool { return cpu[names[i]] > cpu[names[j]] })
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "process\tCPU time\tshare\t\n")
	for _, name := range names {
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t\n", name, cpu[name].Round(100*time.Millisecond), 100*cpu[name].Seconds()/sum.Seconds())
	}
	fmt.Fprintf(tw, "all (%.2f cores busy over %s)\t%s\t100%%\t\n", sum.Seconds()/wall.Seconds(), wall.Round(100*time.Millisecond), sum.Round(100*time.Millisecond))
	tw.Flush()
}

// sinceWriter prefixes each line written to w with the time since start.
type sinceWriter struct {
	w       io.Writer
	start   time.Time
	midLine bool
}

func (s *sinceWriter) Write(p []byte) (int, error) {
	var b []byte
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !s.midLine {
			b = fmt.Appendf(b, "[%6.2fs] ", time.Since(s.start).Seconds())
		}
		b = append(b, line...)
		s.midLine = line[len(line)-1] != '\n'
	}
	if _, err := s.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// restOfMachine names, in printCPU's table, the CPU time the machine's
// cores spent outside the processes named: the kernel's share of the
// traffic between them over loopback, the benchmark's own process, the
// live pipeline's idle instances.
const restOfMachine = "the rest (kernel, this benchmark, idle functions)"

// machineBusy returns the CPU time all cores have been busy so far (from
// /proc/stat; not idle, not waiting for I/O).
func machineBusy() time.Duration {
	busy, _, _ := readProcStat()
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}
