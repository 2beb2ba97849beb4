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

// ServicePID returns the pid of a service that scripts/stack started
// (service is "pulsar", "cassandra" or "s3"), from its pid file in the
// checkout's .stack folder.
func ServicePID(t testing.TB, service string) int {
	t.Helper()
	file := filepath.Join(RepoRoot(), ".stack", service, service+".pid")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the pid of %s (started by scripts/stack up?): %v", service, err)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil {
		t.Fatalf("reading the pid of %s from %s: %v", service, file, err)
	}
	return pid
}

// clockTicks is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux this runs on).
const clockTicks = 100

// CPUTime returns the CPU time (user and system) that process pid has used
// so far, 0 when it is gone.
func CPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscanf(fields[11], "%d", &utime)
	fmt.Sscanf(fields[12], "%d", &stime)
	return time.Duration(utime+stime) * time.Second / clockTicks
}
