package pf_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/testenv"
)

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freePort returns a port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// identityConf is an instance config for the identity example reading a
// test topic, with free ports.
func identityConf(t *testing.T, s testenv.Services, name string) (conf string, metricsPort int) {
	t.Helper()
	metricsPort = freePort(t)
	details, err := json.Marshal(map[string]any{
		"tenant": "public", "namespace": "default", "name": name, "secretsMap": functionSecrets(t, s),
		"source": map[string]any{"inputSpecs": map[string]any{"persistent://public/default/pftest-sigterm-in": map[string]any{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{
		"pulsarServiceURL": s.PulsarURL, "port": freePort(t), "metricsPort": metricsPort, "functionDetails": string(details),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adminREST(t, s, "DELETE", "/admin/v2/persistent/public/default/pftest-sigterm-in?force=true", nil)
	})
	return string(raw), metricsPort
}

// An instance whose parent (the worker) dies shuts itself down.
func TestStartExitsWhenTheWorkerDies(t *testing.T) {
	s := testenv.Pulsar(t)
	bin := buildExample(t, "identity")
	conf, _ := identityConf(t, s, "pftest-orphan")
	// The shell plays the worker: it starts the instance and dies.
	out, err := exec.Command("sh", "-c", `"$0" -instance-conf "$1" >/dev/null 2>&1 & echo $!; sleep 3`, bin, conf).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("reading the instance pid from %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	testenv.WaitFor(t, 30*time.Second, "the orphaned instance to exit", func() bool {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		return err != nil || strings.Contains(string(status), "State:\tZ") // gone, or a zombie nobody reaps
	})
}

// A binary built with pf.Start, started the way the worker starts it, serves
// metrics while connected and exits cleanly within the worker's 10 s grace
// after SIGTERM; a malformed config makes it exit 1 naming the key.
func TestStartExitsOnSIGTERM(t *testing.T) {
	s := testenv.Pulsar(t)
	bin := buildExample(t, "identity")
	conf, metricsPort := identityConf(t, s, "pftest-sigterm")
	cmd := exec.Command(bin, "-instance-conf", conf)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	testenv.WaitFor(t, time.Minute, "the instance to subscribe", func() bool {
		return strings.Contains(stderr.String(), "msg=running")
	})
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGTERM\n%s", stderr.String())
	}

	out, err := exec.Command(bin, "-instance-conf", `{"port":"x"}`).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(string(out), `key "port"`) {
		t.Errorf("malformed config: %v, output %q; want exit status 1 naming key \"port\"", err, out)
	}
}
