package deploy

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/functions/pf"
)

// apply carries out the plan's pending changes in order, announcing each
// on progress. It stops at the first failure: what was done stays done, and
// a re-run (or status) shows the rest.
func apply(ctx context.Context, plan *Plan, progress io.Writer) ([]Change, error) {
	var done []Change
	for _, c := range plan.Pending() {
		fmt.Fprintf(progress, "%s %s %s\n", verb(c.Action), c.Kind, c.Name)
		if err := c.apply(ctx); err != nil {
			return done, fmt.Errorf("%s %s %s: %w", verb(c.Action), c.Kind, c.Name, err)
		}
		done = append(done, c)
	}
	return done, nil
}

func verb(a Action) string {
	switch a {
	case Create:
		return "creating"
	case Update:
		return "updating"
	case Replace:
		return "replacing"
	}
	return string(a)
}

// waitRunning polls every function of the plan until each has all its
// instances running, or the timeout passes (an ErrNotReady error that says
// which instances are not running and why). started says whether functions
// were just created or updated: the first look then waits firstRunningPoll.
func waitRunning(ctx context.Context, pulsar *pulsarx.Clients, plan *Plan, timeout time.Duration, progress io.Writer, started bool) error {
	deadline := time.Now().Add(timeout)
	lastReport := ""
	first := time.Duration(0)
	if started {
		first = firstRunningPoll
	}
	for wait := first; ; wait = runningPoll {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for function instances: %w", ctx.Err())
		case <-time.After(wait):
		}
		var waiting []string
		running, total := 0, 0
		for _, f := range plan.functions {
			st := f.Stage
			total += st.Parallelism
			n, reasons, err := instancesRunning(ctx, pulsar, f)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", st.Name, err))
				continue
			}
			running += min(n, st.Parallelism)
			if n < st.Parallelism {
				w := fmt.Sprintf("%s: %d/%d running", st.Name, n, st.Parallelism)
				if len(reasons) > 0 {
					w += " (" + strings.Join(reasons, "; ") + ")"
				}
				waiting = append(waiting, w)
			}
		}
		if len(waiting) == 0 {
			fmt.Fprintf(progress, "all %d instances running\n", total)
			return nil
		}
		if report := fmt.Sprintf("waiting for instances: %d/%d running", running, total); report != lastReport {
			fmt.Fprintln(progress, report)
			lastReport = report
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %s for function instances: %s: %w", timeout, strings.Join(waiting, "; "), exitcode.ErrNotReady)
		}
	}
}

// runningInstances counts a function's running instances and says, for
// each of the others, what the worker knows of why: its error, and how
// often it restarted the instance. An instance of Foldline's runtime that
// cannot start stays up and gives its reason as its error (functions/pf,
// refusal.go). One that exits (a port it cannot listen on, a runtime of
// before) leaves the error empty, and the worker shows that empty error
// for it from then on, while it is not running: its latest system
// exception, when it has one, is the reason then; else the restarts are
// all there is to tell it from a slow start, and its own last words are in
// the worker's output (for the stack's standalone,
// .stack/pulsar/logs/pulsar.out).
func runningInstances(status utils.FunctionStatus) (running int, reasons []string) {
	for _, inst := range status.Instances {
		st := inst.Status
		if n := len(st.LatestSystemExceptions); !st.Running && st.Err == "" && n > 0 {
			st.Err = st.LatestSystemExceptions[n-1].ExceptionString
		}
		switch {
		case st.Running:
			running++
		case st.Err != "" && st.NumRestarts > 0:
			reasons = append(reasons, fmt.Sprintf("instance %d: %s, restarted %d times", inst.InstanceID, st.Err, st.NumRestarts))
		case st.Err != "":
			reasons = append(reasons, fmt.Sprintf("instance %d: %s", inst.InstanceID, st.Err))
		case st.NumRestarts > 0:
			reasons = append(reasons, fmt.Sprintf("instance %d: restarted %d times, each time it exited (see the worker's output for its error)", inst.InstanceID, st.NumRestarts))
		}
	}
	return running, reasons
}

// instancesRunning counts f's instances that run f's config, and says why
// the others do not (runningInstances). Once all run, it asks their stats
// which config: the worker restarts an updated function's instances a
// moment after the update returned, and until then the old ones answer
// that they run. An instance that reports no fingerprint (a binary from
// before instances reported it) counts as f's.
func instancesRunning(ctx context.Context, pulsar *pulsarx.Clients, f desiredFunction) (int, []string, error) {
	st := f.Stage
	status, err := pulsar.Functions.GetFunctionStatusWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	if err != nil {
		return 0, nil, err
	}
	n, reasons := runningInstances(status)
	fp, _ := f.Config.UserConfig[UserConfigFingerprint].(string)
	want, ok := pf.FingerprintMetric(fp)
	if n < st.Parallelism || !ok {
		return n, reasons, nil
	}
	stats, err := pulsar.Functions.GetFunctionStatsWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	if err != nil {
		return 0, nil, fmt.Errorf("reading its instances' stats: %w", err)
	}
	stale := staleReasons(stats, want)
	return max(n-len(stale), 0), append(reasons, stale...), nil
}

// staleReasons says, of each instance in stats whose fingerprint metric
// is not want, that it still runs the config before.
func staleReasons(stats utils.FunctionStats, want float64) []string {
	var reasons []string
	for _, inst := range stats.Instances {
		if have, ok := inst.Metrics.UserMetrics[UserConfigFingerprint]; ok && have != want {
			reasons = append(reasons, fmt.Sprintf("instance %d: still runs the config before (the worker restarts it)", inst.InstanceID))
		}
	}
	return reasons
}

// runningPoll is how often waitRunning asks the worker for the instances'
// status: an instance comes up in one to a few seconds, and a backfill's
// copy waits for it.
const runningPoll = 250 * time.Millisecond

// firstRunningPoll is how long waitRunning waits before it first asks
// after functions were created or updated. The worker answers a status
// call by asking the instance over gRPC; asked before the instance listens
// (a few milliseconds after its process starts, which is when the create
// of the last function returns), its channel fails and waits about a
// second (gRPC's reconnect backoff) before it tries again, and until then
// the worker reports the instance not running, though it already
// processes. In its log here an instance started 7 ms before the first
// status call, processed within 25 ms, and was reported running 1.3 s
// later.
const firstRunningPoll = 300 * time.Millisecond
