package pf_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
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

// A binary built with pf.Start, started the way the worker starts it, serves
// metrics while connected and exits cleanly within the worker's 10 s grace
// after SIGTERM; a malformed config makes it exit 1 naming the key.
func TestStartExitsOnSIGTERM(t *testing.T) {
	s := testenv.Pulsar(t)
	bin := buildExample(t, "identity")
	metricsPort := freePort(t)
	details, err := json.Marshal(map[string]any{
		"tenant": "public", "namespace": "default", "name": fmt.Sprintf("pftest-sigterm-%d", metricsPort),
		"source": map[string]any{"inputSpecs": map[string]any{"persistent://public/default/pftest-sigterm-in": map[string]any{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{
		"pulsarServiceURL": s.PulsarURL, "port": freePort(t), "metricsPort": metricsPort, "functionDetails": string(details),
	})
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "-instance-conf", string(conf))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		adminREST(t, s, "DELETE", "/admin/v2/persistent/public/default/pftest-sigterm-in?force=true", nil)
	})

	waitFor(t, "the instance to subscribe", time.Minute, func() bool {
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
