package deploy

import (
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// An instance that is not running is reported with what the worker knows:
// its error and its restarts; one that exits at once has restarts only, or
// its latest system exception when the worker blanked its error.
func TestRunningInstancesSaysWhyOthersAreNot(t *testing.T) {
	status := utils.FunctionStatus{Instances: []utils.FunctionInstanceStatus{
		{InstanceID: 0, Status: utils.FunctionInstanceStatusData{Running: true, NumRestarts: 2}},
		{InstanceID: 1, Status: utils.FunctionInstanceStatusData{NumRestarts: 150}},
		{InstanceID: 2, Status: utils.FunctionInstanceStatusData{Err: "UNAVAILABLE: io exception"}},
		{InstanceID: 3, Status: utils.FunctionInstanceStatusData{Err: "UNAVAILABLE: io exception", NumRestarts: 4}},
		{InstanceID: 4}, // starting: nothing to say yet
		{InstanceID: 5, Status: utils.FunctionInstanceStatusData{NumRestarts: 1, LatestSystemExceptions: []utils.ExceptionInformation{
			{ExceptionString: "an old one"}, {ExceptionString: "bad instance config: no token"}}}},
	}}
	running, reasons := runningInstances(status)
	if running != 1 {
		t.Errorf("running = %d, want 1", running)
	}
	want := []string{
		"instance 1: restarted 150 times, each time it exited (see the worker's output for its error)",
		"instance 2: UNAVAILABLE: io exception",
		"instance 3: UNAVAILABLE: io exception, restarted 4 times",
		"instance 5: bad instance config: no token, restarted 1 times",
	}
	if !slices.Equal(reasons, want) {
		t.Errorf("reasons\n got %q\nwant %q", reasons, want)
	}
}

// An instance whose fingerprint is another config's still runs the config
// before the update; one that reports none counts as the deployed one.
func TestStaleReasonsNameTheInstancesOfTheConfigBefore(t *testing.T) {
	with := func(id int64, metrics map[string]float64) utils.FunctionInstanceStats {
		inst := utils.FunctionInstanceStats{InstanceID: id}
		inst.Metrics.UserMetrics = metrics
		return inst
	}
	stats := utils.FunctionStats{Instances: []utils.FunctionInstanceStats{
		with(0, map[string]float64{UserConfigFingerprint: 7}),
		with(1, map[string]float64{UserConfigFingerprint: 8, "inputs": 7}),
		with(2, nil),
	}}
	got := staleReasons(stats, 7)
	want := []string{"instance 1: still runs the config before (the worker restarts it)"}
	if !slices.Equal(got, want) {
		t.Errorf("stale reasons\n got %q\nwant %q", got, want)
	}
}
