// Package testenv finds the real services that integration tests run against
// (Pulsar standalone and Cassandra, started by scripts/stack). When a service
// does not answer, a test skips with a message that names the service and
// the command that starts it; under CI (CI=true) a missing service fails the
// test instead, so nothing skips there. Every test that needs the stack goes
// through Pulsar, Cassandra or All (or Require, for what else it needs), so
// that go test without a stack skips, never fails; scripts/unit runs go test
// and lists the skipped tests by message at the end.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/foldline/foldline/internal/services"
)

// StartHint is the command that starts every service the tests need.
const StartHint = services.StartHint

// Services holds the addresses of the local stack.
type Services = services.Services

// Load resolves the service settings (services.LoadForTests): the
// environment, else the local stack's addresses and credentials — never a
// context of the user's config file.
func Load(t testing.TB) Services {
	t.Helper()
	s, err := services.LoadForTests()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Pulsar returns the services after checking that Pulsar answers; otherwise
// the test skips (or fails under CI).
func Pulsar(t testing.TB) Services {
	t.Helper()
	s := Load(t)
	Require(t, s.CheckPulsar())
	return s
}

// Cassandra returns the services after checking that Cassandra answers;
// otherwise the test skips (or fails under CI).
func Cassandra(t testing.TB) Services {
	t.Helper()
	s := Load(t)
	Require(t, s.CheckCassandra())
	return s
}

// All returns the services after checking that Pulsar and Cassandra answer.
func All(t testing.TB) Services {
	t.Helper()
	Pulsar(t)
	return Cassandra(t)
}

// Require skips the test when err is not nil, or fails it under CI (where
// nothing may skip). err says what is missing and which script provides
// it: the skip message is all a run without the stack tells about the test.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// RepoRoot returns the checkout's top folder (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// DisruptiveEnv is the environment variable that lets a test stop and
// restart shared services. scripts/test sets it in a second, serial phase,
// after every other test has finished.
const DisruptiveEnv = "FOLDLINE_DISRUPTIVE_TESTS"

// Disruptive skips a test that stops shared services unless DisruptiveEnv
// is 1. Such tests carry "Disruptive" in their names, which is how
// scripts/test selects them for its serial phase.
func Disruptive(t testing.TB) {
	t.Helper()
	if os.Getenv(DisruptiveEnv) != "1" {
		t.Skip("stops and restarts a shared service; runs in the serial phase of scripts/test (" + DisruptiveEnv + "=1)")
	}
}

// Stack runs scripts/stack with args (for example "down", "cassandra").
func Stack(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(), "scripts", "stack"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/stack %v: %v\n%s", args, err, out)
	}
}

// BrowserHint is the command that installs the browser the page tests use.
const BrowserHint = "scripts/browser"

// Chromium returns the path of a Chromium (FOLDLINE_CHROMIUM, else chromium
// or chromium-browser on the PATH) for the tests that open a page in a real
// browser; without one the test skips (or fails under CI) naming the script
// that installs it.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FOLDLINE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Require(t, fmt.Errorf("no Chromium on the PATH (or FOLDLINE_CHROMIUM): install it with %s", BrowserHint))
	return ""
}
