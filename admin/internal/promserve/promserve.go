// Package promserve serves a Prometheus registry over HTTP for the
// commands that export metrics while they run (foldline metrics, verify
// --every, backfill --metrics-listen).
package promserve

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

// Server is a running metrics endpoint.
type Server struct {
	// Addr is the address it listens on (the port chosen when the one
	// asked for was 0).
	Addr string
	srv  *http.Server
}

// Listen serves g's metrics at /metrics (and /) on addr until Close. An
// address that cannot be listened on is a usage error (exitcode.ErrUsage)
// that names flag.
func Listen(addr, flag string, g prometheus.Gatherer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (%s): %w: %w", addr, flag, err, exitcode.ErrUsage)
	}
	handler := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	mux.Handle("/", handler)
	s := &Server{Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }() // ends with Close
	return s, nil
}

// Close stops serving.
func (s *Server) Close() {
	if s != nil {
		_ = s.srv.Close()
	}
}
