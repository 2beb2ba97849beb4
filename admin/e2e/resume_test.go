package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/internal/testenv"
)

// helperArgsEnv carries the arguments of foldline backfill to the helper
// process (TestHelperBackfillCommand), one per line.
const helperArgsEnv = "FOLDLINE_E2E_BACKFILL_ARGS"

// TestHelperBackfillCommand is not a test: it runs foldline backfill's
// command with the arguments in helperArgsEnv, in a process of its own
// that a test kills (startBackfillCLI).
func TestHelperBackfillCommand(t *testing.T) {
	args := os.Getenv(helperArgsEnv)
	if args == "" {
		t.Skip("a helper process of the tests that kill foldline backfill")
	}
	cmd := backfill.NewCommand()
	cmd.SetArgs(strings.Split(args, "\n"))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// startBackfillCLI starts foldline backfill with args (after the view,
// --tenant of s is added) in a process of its own: this test binary
// running TestHelperBackfillCommand. Its output goes to the test's log.
func (s *shop) startBackfillCLI(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	args = append(args, "--tenant", s.tenant)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBackfillCommand$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperArgsEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = testenv.LogWriter{T: t}, testenv.LogWriter{T: t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting foldline backfill: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// killAtCheckpoint waits until the fused run of the backfill of view has
// written a checkpoint covering at least events ledger events, then kills
// the CLI running it (SIGKILL), and returns the record as the kill left it.
func (s *shop) killAtCheckpoint(t testing.TB, cmd *exec.Cmd, view string, events int64) *backfillrecord.Record {
	t.Helper()
	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	var rec *backfillrecord.Record
	// Every 20 ms: the checkpoints come every 200 ms, and a run at
	// --max-rate is done in seconds.
	testenv.WaitForEvery(t, 5*time.Minute, 20*time.Millisecond, "a checkpoint of the fused run", func() bool {
		r, err := store.Unfinished(t.Context(), view)
		if err != nil || r == nil || r.Fused == nil {
			return false
		}
		rec = r
		return r.Fused.Events >= events || r.Fused.Done
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("killing foldline backfill: %v", err)
	}
	_ = cmd.Wait()
	if rec.Fused.Done {
		t.Fatalf("the fused run was done before it could be killed (%d events): make the ledger longer", rec.Fused.Events)
	}
	return rec
}

// resumeRate is the --max-rate of the runs the tests kill part-way: about
// ten seconds for their resumeEvents events, so that the kill comes after
// a checkpoint (with --copy-all, one whose keys' states are saved) and
// before the end, on a loaded machine too. Unbounded, a run of 150 000
// events took 4.5 s and was done before its first saved checkpoint showed.
const resumeRate = 3000

// resumeEvents is the ledger of the tests that kill a run part-way: the
// rate, not the ledger's length, keeps the run long enough to be killed,
// and the deployed shop folds the ledger first (about 1 600 events a
// second here), which is most of such a test's time.
const resumeEvents = 30_000

// TestFusedBackfillSurvivesItsOperator kills foldline backfill (SIGKILL)
// while its fused run is part-way through the ledger (read at --max-rate,
// which the events written by the kill show), ingests more events, and
// runs foldline backfill again: it resumes the run from the checkpoint
// (the record counts two runs, and the resumed one starts from the events
// the first confirmed written), deploys the copy, switches, and the new
// table equals the fold of the whole ledger. Before, the record stayed
// running with no way on but --abort.
func TestFusedBackfillSurvivesItsOperator(t *testing.T) {
	s := deployShop(t, "resume")
	events := generate(t, testenv.EnvInt(t, "FOLDLINE_RESUME_EVENTS", resumeEvents), 25)
	s.ingest(t, events)
	s.waitForFold(t, 10*time.Minute)

	started := time.Now()
	cli := s.startBackfillCLI(t, "user_activity", s.opts.Dir, "--engine", "fused", "--checkpoint", "200ms", "--grace", "0s", "--max-rate", strconv.Itoa(resumeRate))
	killed := s.killAtCheckpoint(t, cli, "user_activity", int64(len(events)/4))
	t.Logf("killed with %d of %d ledger events confirmed written", killed.Fused.Events, len(events))
	if most := int64(time.Since(started).Seconds()*resumeRate) + 2000; killed.Fused.Events > most {
		t.Errorf("--max-rate %d: %d events written in %s, more than the rate allows (%d, a batch of 2000 included)", resumeRate, killed.Fused.Events, time.Since(started), most)
	}

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	if _, err := backfill.Run(t.Context(), opts, false); err == nil {
		t.Log("resumed at once: the heartbeat had stopped already")
	} else if !strings.Contains(err.Error(), "resumes from the checkpoint") {
		t.Fatalf("running foldline backfill again right after the kill: %v, want a refusal that says it will resume", err)
	}
	s.ingest(t, generate(t, 2000, 26))
	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	testenv.WaitFor(t, time.Minute, "the killed run's heartbeat stopped", func() bool {
		r, err := store.Unfinished(t.Context(), "user_activity")
		return err == nil && r != nil && r.FusedStalled(time.Now())
	})
	opts.Grace, opts.GraceSet = 0, true
	res, err := backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("running foldline backfill again after the kill: %v", err)
	}
	if res.Table != killed.Table || res.State != backfill.StateSwitched {
		t.Fatalf("result %+v, want %s switched", res, killed.Table)
	}
	rec, err := store.ByTable(t.Context(), "user_activity", res.Table)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Fused == nil || rec.Fused.Runs != 2 || !rec.Fused.Done || rec.Fused.Events < killed.Fused.Events {
		t.Errorf("the record's fused run %+v, want done in 2 runs, past the killed run's %d events", rec.Fused, killed.Fused.Events)
	}
	s.waitForFold(t, 5*time.Minute)

	// Once more with the whole path copied (--copy-all): the stateful
	// dedup runs in the fused run, and its keys' states are saved with
	// each checkpoint. The resumed run starts from them, not from the
	// ledger's first event, and the copy deployed after it goes on from
	// its states: the views stay the fold through more events (a
	// duplicate among them) after the switch.
	cli = s.startBackfillCLI(t, "user_activity", s.opts.Dir, "--engine", "fused", "--checkpoint", "200ms", "--grace", "0s", "--copy-all", "--max-rate", strconv.Itoa(resumeRate))
	killed = s.killAtCheckpoint(t, cli, "user_activity", int64(len(s.ledger)/4))
	t.Logf("--copy-all: killed with %d of %d ledger events confirmed written", killed.Fused.Events, len(s.ledger))
	testenv.WaitFor(t, time.Minute, "the killed run's heartbeat stopped", func() bool {
		r, err := store.Unfinished(t.Context(), "user_activity")
		return err == nil && r != nil && r.FusedStalled(time.Now())
	})
	var out strings.Builder
	opts.ErrOut = io.MultiWriter(&out, testenv.LogWriter{T: t})
	res, err = backfill.Run(t.Context(), opts, false)
	if err != nil {
		t.Fatalf("running foldline backfill --copy-all again after the kill: %v", err)
	}
	if res.Table != killed.Table || res.State != backfill.StateSwitched {
		t.Fatalf("result %+v, want %s switched", res, killed.Table)
	}
	for _, want := range []string{"resuming from its checkpoint", "starting dedup", "from the states of"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the resumed run did not say %q: it did not start from the saved states", want)
		}
	}
	if rec, err = store.ByTable(t.Context(), "user_activity", res.Table); err != nil {
		t.Fatal(err)
	}
	if rec.Fused == nil || rec.Fused.Runs != 2 || !rec.Fused.Done || rec.Fused.Events > int64(len(s.ledger)+2000) {
		t.Errorf("the record's fused run %+v, want done in 2 runs that read the ledger (%d events) about once", rec.Fused, len(s.ledger))
	}
	s.ingest(t, generate(t, 2000, 27))
	s.produce(t, s.ledger[:3]) // the first events again, past ingest's own dedup: the copy's dedup knows their ids
	s.waitForFold(t, 5*time.Minute)
}

// TestClusterBackfillSurvivesItsRunner runs a backfill with the whole path
// copied (--copy-all: the stateful dedup in the run) on the cluster
// (--engine cluster), kills the runner's process (SIGKILL) part-way and
// then the CLI that started it: the worker starts the runner again, which
// resumes from its checkpoint and saved states and finishes the run with
// no CLI running. foldline backfill --watch then deploys the copy from
// there and switches, and the views equal the fold of the ledger, events
// ingested meanwhile and a duplicate included.
func TestClusterBackfillSurvivesItsRunner(t *testing.T) {
	s := deployShop(t, "cluster")
	events := generate(t, testenv.EnvInt(t, "FOLDLINE_CLUSTER_EVENTS", resumeEvents), 28)
	s.ingest(t, events)
	s.waitForFold(t, 10*time.Minute)

	cli := s.startBackfillCLI(t, "user_activity", s.opts.Dir, "--engine", "cluster", "--checkpoint", "500ms", "--grace", "0s", "--copy-all", "--max-rate", strconv.Itoa(resumeRate))
	store := backfillrecord.Store{CQL: s.session, Keyspace: s.keyspace}
	// The runner's process is found first and the checkpoint polled every
	// 20 ms after it: the run takes a few seconds, and a search for the
	// process after the checkpoint can come too late.
	pid := runnerProcess(t, "user_activity_v2-sink-runner")
	var rec *backfillrecord.Record
	testenv.WaitForEvery(t, 5*time.Minute, 20*time.Millisecond, "a checkpoint of the run on the cluster", func() bool {
		r, err := store.Unfinished(t.Context(), "user_activity")
		rec = r
		return err == nil && r != nil && r.Fused != nil && (r.Fused.Events >= int64(len(events)/10) || r.Fused.Done)
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the runner: %v", err)
	}
	killed, err := store.ByTable(t.Context(), "user_activity", rec.Table)
	if err != nil {
		t.Fatal(err)
	}
	if killed.Fused.Done {
		t.Fatalf("the run was done before its runner could be killed (%d events): make the ledger longer", killed.Fused.Events)
	}
	t.Logf("the runner (pid %d) killed with %d of %d ledger events confirmed written, in run %d", pid, killed.Fused.Events, len(events), killed.Fused.Runs)
	if err := cli.Process.Kill(); err != nil {
		t.Fatalf("killing foldline backfill: %v", err)
	}
	_ = cli.Wait()
	testenv.WaitFor(t, 5*time.Minute, "the run done on the cluster, with no CLI", func() bool {
		r, err := store.ByTable(t.Context(), "user_activity", rec.Table)
		rec = r
		return err == nil && r != nil && r.Fused != nil && r.Fused.Done
	})
	// A resumed run reads its checkpoint's entry again (500 events here).
	if rec.Fused.Runs <= killed.Fused.Runs || rec.Fused.Events > int64(len(events)+1000) {
		t.Errorf("the run %+v, want done in more runs than %d, reading the ledger (%d events) about once", rec.Fused, killed.Fused.Runs, len(events))
	}
	s.ingest(t, generate(t, 2000, 29))

	opts := s.backfillOptions("user_activity", s.opts.Dir)
	opts.Grace, opts.GraceSet = 0, true
	var out strings.Builder
	opts.ErrOut = io.MultiWriter(&out, testenv.LogWriter{T: t})
	res, err := backfill.Run(t.Context(), opts, true)
	if err != nil {
		t.Fatalf("foldline backfill --watch after the kills: %v", err)
	}
	if res.Table != rec.Table || res.State != backfill.StateSwitched {
		t.Fatalf("result %+v, want %s switched", res, rec.Table)
	}
	if runner := "deleted function " + rec.Stages[len(rec.Stages)-1].FullName() + "-runner"; !strings.Contains(out.String(), runner) {
		t.Errorf("foldline backfill --watch did not remove the runner, whose run was done: want %q", runner)
	}
	s.ingest(t, generate(t, 2000, 30))
	s.produce(t, s.ledger[:3]) // the first events again, past ingest's own dedup: the copy's dedup knows their ids
	s.waitForFold(t, 5*time.Minute)

	// An abort while a run goes on on the cluster removes its runner.
	cli = s.startBackfillCLI(t, "user_activity", s.opts.Dir, "--engine", "cluster", "--grace", "0s")
	runner := runnerProcess(t, "user_activity_v3-sink-runner")
	if err := cli.Process.Kill(); err != nil {
		t.Fatalf("killing foldline backfill: %v", err)
	}
	_ = cli.Wait()
	aborted, err := backfill.Abort(t.Context(), opts)
	if err != nil {
		t.Fatalf("aborting the backfill on the cluster: %v", err)
	}
	if aborted.Table != "user_activity_v3" {
		t.Errorf("aborted %s, want user_activity_v3", aborted.Table)
	}
	clients, err := pulsarx.Connect(s.svc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Functions.GetFunctionWithContext(t.Context(), s.tenant, "pipeline", "user_activity_v3-sink-runner"); !pulsarx.IsNotFound(err) {
		t.Errorf("the runner after the abort: %v, want not found", err)
	}
	testenv.WaitFor(t, time.Minute, "the runner's process gone", func() bool { return syscall.Kill(runner, 0) != nil })
	s.waitForFold(t, 5*time.Minute)
}

// runnerProcess returns the process of the functions worker's instance of
// the function named name (the worker runs it from a folder named after
// it), waiting until it runs.
func runnerProcess(t testing.TB, name string) int {
	t.Helper()
	var pid int
	testenv.WaitForEvery(t, 2*time.Minute, 50*time.Millisecond, "the runner's process", func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			cmdline, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			args := strings.Split(string(cmdline), "\x00")
			if strings.Contains(args[0], "/"+name+"/") && !slices.Contains(args, "-local") {
				pid, _ = strconv.Atoi(strings.Split(p, "/")[2])
				return pid > 0
			}
		}
		return false
	})
	return pid
}
