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
