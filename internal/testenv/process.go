package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// InstancePIDs returns the pids of the processes running a function's
// instances: the worker starts each from the binary it downloaded to
// download/pulsar_functions/<tenant>/<ns>/<name>/<instance>/.
func InstancePIDs(t testing.TB, tenant, ns, name string) []int {
	t.Helper()
	marker := fmt.Sprintf("/pulsar_functions/%s/%s/%s/", tenant, ns, name)
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	var pids []int
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if strings.Contains(argv0, marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitFor polls cond every 250 ms until it returns true, and fails the test
// with what was awaited once timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
