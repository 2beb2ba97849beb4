package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/services"
)

// InstancePIDs returns the pids of the processes running a function's
// instances: the worker starts each from the binary it downloaded to
// download/pulsar_functions/<tenant>/<ns>/<name>/<instance>/.
func InstancePIDs(t testing.TB, tenant, ns, name string) []int {
	t.Helper()
	marker := fmt.Sprintf("/pulsar_functions/%s/%s/%s/", tenant, ns, name)
	return proc.PIDs(func(argv []string) bool { return strings.Contains(argv[0], marker) })
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
// stack folder (services.StackDir).
func ServicePID(t testing.TB, service string) int {
	t.Helper()
	file := filepath.Join(services.StackDir(), service, service+".pid")
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
