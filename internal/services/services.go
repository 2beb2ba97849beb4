// Package services locates the Pulsar and Cassandra that Foldline talks to,
// from environment variables with the local stack's addresses as defaults,
// and turns "connection refused" into an error that names the script that
// starts the stack.
package services

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// StartHint is the command that starts the local stack.
const StartHint = "scripts/stack up"

// ErrUnreachable is returned by Check when a service does not answer.
var ErrUnreachable = errors.New("service unreachable")

// Services holds the addresses of Pulsar and Cassandra.
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

// CheckPulsar returns an ErrUnreachable error naming the start script when
// the broker or its admin API does not accept connections.
func (s Services) CheckPulsar() error {
	if err := Check("Pulsar", HostPort(s.PulsarURL)); err != nil {
		return err
	}
	return Check("Pulsar admin API", HostPort(s.PulsarAdminURL))
}

// CheckCassandra returns an ErrUnreachable error naming the start script when
// Cassandra does not accept connections.
func (s Services) CheckCassandra() error {
	return Check("Cassandra", s.CassandraHost)
}

// Check dials addr once and wraps a failure in ErrUnreachable with the start hint.
func Check(name, addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("%w: %s is not reachable at %s (%v); start it with %s", ErrUnreachable, name, addr, err, StartHint)
	}
	return conn.Close()
}

// HostPort turns scheme://host:port[/path] into host:port.
func HostPort(url string) string {
	if i := strings.Index(url, "://"); i >= 0 {
		url = url[i+3:]
	}
	if i := strings.IndexByte(url, '/'); i >= 0 {
		url = url[:i]
	}
	return url
}
