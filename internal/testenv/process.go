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
// instances.
func InstancePIDs(t testing.TB, tenant, ns, name string) []int {
	t.Helper()
	var pids []int
	for _, inst := range Instances(tenant, ns) {
		if inst.Function == name {
			pids = append(pids, inst.PID)
		}
	}
	return pids
}

// Instance is the process running one instance of a function.
type Instance struct {
	// Function is the function's name, Index the instance's id (0, 1, …).
	Function, Index string
	PID             int
}

// Instances returns the processes running the instances of every
// function of namespace ns of tenant: the worker starts each from the
// binary it downloaded to
// download/pulsar_functions/<tenant>/<ns>/<name>/<instance>/.
func Instances(tenant, ns string) []Instance {
	marker := fmt.Sprintf("/pulsar_functions/%s/%s/", tenant, ns)
	var out []Instance
	proc.Each(func(pid int, argv []string) {
		_, rest, ok := strings.Cut(argv[0], marker)
		if parts := strings.Split(rest, "/"); ok && len(parts) >= 3 {
			out = append(out, Instance{Function: parts[0], Index: parts[1], PID: pid})
		}
	})
	return out
}

// WaitFor polls cond every 250 ms until it returns true, and fails the test
// with what was awaited once timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitForEvery(t, timeout, 250*time.Millisecond, what, cond)
}

// WaitForEvery is WaitFor polling every interval: for a state that may last
// less than WaitFor's 250 ms.
func WaitForEvery(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// ServicePID returns the pid of a service that scripts/stack started
// (service is "pulsar", "cassandra" or "s3"), from its pid file in the
// stack folder (services.StackDir).
func ServicePID(t testing.TB, service string) int {
	t.Helper()
	pid, err := ReadPIDFile(ServicePIDFile(service))
	if err != nil {
		t.Fatalf("reading the pid of %s (started by scripts/stack up?): %v", service, err)
	}
	return pid
}

// ServicePIDFile is the pid file of a service that scripts/stack started
// (the S3 server's is named after the program, s3proxy).
func ServicePIDFile(service string) string {
	file := service + ".pid"
	if service == "s3" {
		file = "s3proxy.pid"
	}
	return filepath.Join(services.StackDir(), service, file)
}

// ReadPIDFile reads the pid a script wrote to file.
func ReadPIDFile(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil {
		return 0, fmt.Errorf("reading a pid from %s: %w", file, err)
	}
	return pid, nil
}
