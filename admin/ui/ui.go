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
	"os"
	"os/signal"
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
proxy that has one.`,
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
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
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
