// Package testenv finds the real services that integration tests run against
// (Pulsar standalone and Cassandra, started by scripts/stack) through
// environment variables with local defaults. When a service does not answer,
// a test skips with the command that starts it; under CI (CI=true) a missing
// service fails the test instead, so nothing skips there.
package testenv

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// StartHint is the command that starts every service the tests need.
const StartHint = "scripts/stack up"

// Services holds the addresses of the local stack.
type Services struct {
	// PulsarURL is the broker's binary protocol URL (FOLDLINE_PULSAR_URL,
	// default pulsar://127.0.0.1:6650).
	PulsarURL string
	// PulsarAdminURL is the broker's and functions worker's HTTP URL
	// (FOLDLINE_PULSAR_ADMIN_URL, default http://127.0.0.1:8080).
	PulsarAdminURL string
	// CassandraHost is host:port of the CQL native transport
	// (FOLDLINE_CASSANDRA, default 127.0.0.1:9042).
	CassandraHost string
}

// FromEnv reads the service addresses from the environment, with defaults.
func FromEnv() Services {
	return Services{
		PulsarURL:      getenv("FOLDLINE_PULSAR_URL", "pulsar://127.0.0.1:6650"),
		PulsarAdminURL: getenv("FOLDLINE_PULSAR_ADMIN_URL", "http://127.0.0.1:8080"),
		CassandraHost:  getenv("FOLDLINE_CASSANDRA", "127.0.0.1:9042"),
	}
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Pulsar returns the services after checking that Pulsar answers; otherwise
// the test skips (or fails under CI).
func Pulsar(t testing.TB) Services {
	t.Helper()
	s := FromEnv()
	require(t, "Pulsar", hostPort(s.PulsarURL))
	require(t, "Pulsar admin", hostPort(s.PulsarAdminURL))
	return s
}

// Cassandra returns the services after checking that Cassandra answers;
// otherwise the test skips (or fails under CI).
func Cassandra(t testing.TB) Services {
	t.Helper()
	s := FromEnv()
	require(t, "Cassandra", s.CassandraHost)
	return s
}

// All returns the services after checking that Pulsar and Cassandra answer.
func All(t testing.TB) Services {
	t.Helper()
	Pulsar(t)
	return Cassandra(t)
}

func require(t testing.TB, name, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		_ = conn.Close()
		return
	}
	msg := name + " is not reachable at " + addr + " (" + err.Error() + "); start it with " + StartHint
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// hostPort turns scheme://host:port[/path] into host:port.
func hostPort(url string) string {
	for i := 0; i+2 < len(url); i++ {
		if url[i:i+3] == "://" {
			url = url[i+3:]
			break
		}
	}
	for i := 0; i < len(url); i++ {
		if url[i] == '/' {
			return url[:i]
		}
	}
	return url
}

// RepoRoot returns the checkout's top folder (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
