// Package ui is `foldline ui`: a local web page that draws the deployed DAG
// (the ledger, each stage, each view) with each stage's instances,
// backlog, rate and errors, each view's freshness and table versions, and
// a running backfill's progress, refreshed live.
//
// One goroutine reads the status (package status, over one pair of
// connections) every interval and keeps the latest report; the page polls
// /api/status for it, so any number of open pages cost the cluster one
// reader. The server listens on 127.0.0.1 by default: the page has no
// login, and shows what the credentials it runs with may read.
//
// Listening on loopback is not enough on its own: a web page anywhere can
// point a name of its own at 127.0.0.1 (DNS rebinding) and read the
// status as a same-origin page. The server therefore answers only
// requests whose Host names the address it listens on (or a name given
// with --allow-host), and refuses a request whose Origin is another site.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/status"
)

//go:embed page
var page embed.FS

// Options are ui's settings.
type Options struct {
	status.Options
	// Listen is the address to serve on. Default 127.0.0.1:8088.
	Listen string
	// Interval is how often the status is read. Default 2s.
	Interval time.Duration
	// AllowHosts are further host names (without port) the page answers
	// to, on any port: the name a proxy in front of it forwards as Host.
	// Default none: only the listen address's own names.
	AllowHosts []string
}

// NewCommand returns `foldline ui`.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "ui [DIR]",
		Short: "Serve a live status page: the DAG, instances, backlogs, view freshness, backfills",
		Long: `Serve a web page that draws the pipeline of the manifests in DIR (default manifests/)
as deployed — the ledger, every function and sink, every view — with each stage's
instances, backlog, rate and errors, each view's rows, freshness and table versions,
and the progress of running backfills, refreshed every --interval. It listens on
127.0.0.1:8088 by default; the page has no login, so listen elsewhere only behind a
proxy that has one. It answers only requests whose Host is the address it listens on
(localhost, 127.0.0.1 or [::1] with the port, for a loopback address) and refuses
other sites' requests (Origin): a proxy forwards that Host, or is named with
--allow-host.`,
		Example: "  foldline ui\n  foldline ui --tenant shop-test --listen 127.0.0.1:9999",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := opts.Bind(cmd, args); err != nil {
				return err
			}
			if opts.Interval <= 0 {
				return fmt.Errorf("--interval %s: want a positive duration: %w", opts.Interval, exitcode.ErrUsage)
			}
			ln, err := net.Listen("tcp", opts.Listen)
			if err != nil {
				return fmt.Errorf("listening on %s (--listen): %w: %w", opts.Listen, err, exitcode.ErrUsage)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(opts.ErrOut, "serving the status page on http://%s/ (Ctrl-C stops)\n", ln.Addr())
			return Serve(ctx, opts, ln)
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:8088", "address to serve the page on")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 2*time.Second, "how often the status is read")
	cmd.Flags().StringSliceVar(&opts.AllowHosts, "allow-host", nil, "a further host name the page answers to (the Host a proxy in front forwards); repeatable")
	return cmd
}

// Serve serves the page on ln until ctx ends.
func Serve(ctx context.Context, opts Options, ln net.Listener) error {
	src, err := status.Open(ctx, opts.Options)
	if err != nil {
		ln.Close()
		return err
	}
	defer src.Close()
	interval := opts.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	s := &server{interval: interval}
	go s.poll(ctx, src)
	srv := newHTTPServer(guardHosts(ln.Addr(), opts.AllowHosts, s.handler()))
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the status page: %w", err)
	}
	return nil
}

// The server's timeouts. No endpoint streams (the page polls
// /api/status, whose answer is a few kilobytes held in memory), so a
// request and its answer each fit well within a few seconds; a client
// that trickles its request or never reads the answer is cut off rather
// than holding a connection and a goroutine for ever.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

// newHTTPServer is the page's HTTP server, with its timeouts.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// guardHosts answers only requests meant for this server: their Host
// names the address it listens on, with its port (for a loopback or
// wildcard address: localhost, 127.0.0.1 or [::1]; for a wildcard one,
// also the machine's own addresses), or is one of allow (any port); and
// their Origin, when they have one, is that same host. Others get 421
// Misdirected Request (Host) or 403 Forbidden (Origin): a page that
// rebinds its own name to this address sends its name as Host, and a
// cross-site request sends its site as Origin.
func guardHosts(addr net.Addr, allow []string, next http.Handler) http.Handler {
	own := listenHosts(addr)
	extra := map[string]bool{}
	for _, h := range allow {
		extra[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, port := splitHost(r.Host, "80")
		if !extra[host] && !own[net.JoinHostPort(host, port)] {
			http.Error(w, "misdirected request: this server answers only to the address it listens on (see foldline ui --allow-host)", http.StatusMisdirectedRequest)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
			http.Error(w, "forbidden: a request from another origin", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin says whether origin (a browser's Origin header) is the site
// at host (the request's Host).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // "null" (a sandboxed frame, a file) included
	}
	defaultPort := "80"
	if u.Scheme == "https" {
		defaultPort = "443"
	}
	// The request's Host carries no scheme: behind a TLS proxy it
	// defaults to 443 as the Origin does.
	oh, op := splitHost(u.Host, defaultPort)
	hh, hp := splitHost(host, defaultPort)
	return oh == hh && op == hp
}

// splitHost splits a Host header's host[:port] into the lower-case host
// (without brackets) and the port, defaultPort when it has none.
func splitHost(hostport, defaultPort string) (host, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), defaultPort
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port
}

// listenHosts are the host:port forms a browser may send as Host for a
// server listening on addr.
func listenHosts(addr net.Addr) map[string]bool {
	hosts := map[string]bool{}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return hosts
	}
	port := fmt.Sprint(tcp.Port)
	add := func(host string) { hosts[net.JoinHostPort(strings.ToLower(host), port)] = true }
	if tcp.IP.IsLoopback() || tcp.IP.IsUnspecified() {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			add(h)
		}
	}
	if tcp.IP.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipnet, ok := a.(*net.IPNet); ok {
					add(ipnet.IP.String())
				}
			}
		}
	} else {
		add(tcp.IP.String())
	}
	return hosts
}

// server holds the latest report.
type server struct {
	interval time.Duration
	mu       sync.Mutex
	latest   []byte // the /api/status answer
}

// snapshot is /api/status: the latest report, or the error that kept it
// from being read, with when.
type snapshot struct {
	Report   *status.Report `json:"report,omitempty"`
	Error    string         `json:"error,omitempty"`
	At       time.Time      `json:"at"`
	Interval float64        `json:"intervalSeconds"`
}

// poll reads the status every interval until ctx ends. A failed read keeps
// the last report and adds the error, so the page says what is wrong.
func (s *server) poll(ctx context.Context, src *status.Source) {
	var last *status.Report
	for {
		report, err := src.Report(ctx)
		snap := snapshot{Report: report, At: time.Now().UTC(), Interval: s.interval.Seconds()}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			slog.Warn("reading the status", "error", err)
			snap.Report, snap.Error = last, err.Error()
		} else {
			last = report
		}
		body, err := json.Marshal(snap)
		if err != nil {
			body = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
		}
		s.mu.Lock()
		s.latest = body
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.interval):
		}
	}
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(page, "page") // page/ is embedded: always there
	files := http.FileServerFS(static)
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		body := s.latest
		s.mu.Unlock()
		if body == nil {
			http.Error(w, `{"error":"the first status is still being read"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
	})
	return secured(mux)
}

// secured adds headers that keep the page to its own scripts and out of
// other sites' frames.
func secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
