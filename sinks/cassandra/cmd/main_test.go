package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/safego"
	"github.com/foldline/foldline/sinks/cassandra"
)

// instanceArgs is the command line the functions worker gives an instance
// of the sink with userConfig.
func instanceArgs(t *testing.T, userConfig map[string]any) []string {
	t.Helper()
	uc, err := json.Marshal(userConfig)
	if err != nil {
		t.Fatal(err)
	}
	details, err := json.Marshal(map[string]any{
		"tenant": "shop", "namespace": "pipeline", "name": "user_activity_v1-sink",
		"source":     map[string]any{"inputSpecs": map[string]any{"persistent://shop/pipeline/user-activity-ops": map[string]any{}}},
		"userConfig": string(uc),
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{"pulsarServiceURL": "pulsar://127.0.0.1:6650", "port": 1, "metricsPort": 2, "functionDetails": string(details)})
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-instance-conf", string(conf)}
}

// TestReadConfigRefusesBadSettings: the sink's startup path returns the
// error (main exits with it) instead of starting a sink that takes input
// and never applies it.
func TestReadConfigRefusesBadSettings(t *testing.T) {
	view := func(extra map[string]any) map[string]any {
		uc := map[string]any{
			"keyspace": "shop", "table": "user_activity_v1", "view": "user_activity",
			"key":     []any{map[string]any{"name": "user", "type": "text"}},
			"columns": []any{map[string]any{"name": "page_views", "type": "bigint", "merge": "add"}},
		}
		for k, v := range extra {
			uc[k] = v
		}
		return uc
	}
	cases := []struct {
		name    string
		conf    map[string]any
		wantErr []string
	}{
		{name: "good settings", conf: view(map[string]any{"batch_size": 1000, "linger": "5ms"})},
		{name: "negative batch size and bad duration", conf: view(map[string]any{"batch_size": -5, "linger": "5x"}),
			wantErr: []string{"batch_size -5", `linger "5x"`}},
		{name: "words for a number", conf: view(map[string]any{"concurrency": "lots"}), wantErr: []string{"concurrency"}},
		{name: "no table definition", conf: map[string]any{"batch_size": 10}, wantErr: []string{"keyspace", "table"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := readConfig(instanceArgs(t, tc.conf))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("readConfig: %v", err)
				}
				if cfg.View.Table != "user_activity_v1" || cfg.Settings.BatchSize != 1000 {
					t.Errorf("config = %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("readConfig = nil error, want one naming %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("readConfig error %q does not name %q", err, w)
				}
			}
		})
	}
}

// A sink that cannot set up (here: no Cassandra at its hosts) stops with
// the error once its patience runs out, instead of running and doing
// nothing for ever.
func TestSetUpGivesUpWithTheError(t *testing.T) {
	defer func(p time.Duration) { setupPatience = p }(setupPatience)
	setupPatience = 200 * time.Millisecond
	cfg, err := cassandra.ParseConfig(map[string]any{
		"keyspace": "shop", "table": "t_v1", "view": "t",
		"key":     []any{map[string]any{"name": "k", "type": "text"}},
		"columns": []any{map[string]any{"name": "n", "type": "bigint", "merge": "add"}},
		"hosts":   "127.0.0.1:1", "timeout": "100ms", "retry_backoff_min": "10ms", "retry_backoff_max": "50ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	faults := safego.New()
	go NewSink(cfg).setUp(faults, "", "")
	select {
	case <-faults.Done():
		if err := faults.Err(); err == nil || !strings.Contains(err.Error(), "setting up the sink for shop.t_v1") {
			t.Errorf("fault %v, want the set-up error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("setUp still retrying 30 s after its patience ran out")
	}
}

// An operation Cassandra can never hold goes to the dead-letter topic
// counted as a schema problem when it does not fit the view's table, as
// rejected otherwise; never under its error's text.
func TestRejectedReason(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want pf.DeadLetterReason
	}{
		{name: "unknown column", err: fmt.Errorf("%w: %w: colour", cassandra.ErrRejected, cassandra.ErrUnknownColumn), want: pf.ReasonSchema},
		{name: "value does not fit", err: fmt.Errorf("%w: %w: bigint wants a JSON integer", cassandra.ErrRejected, cassandra.ErrBadValue), want: pf.ReasonSchema},
		{name: "operation for another view", err: fmt.Errorf("%w: %w", cassandra.ErrRejected, cassandra.ErrWrongView), want: pf.ReasonSchema},
		{name: "key of the wrong shape", err: fmt.Errorf("%w: %w", cassandra.ErrRejected, cassandra.ErrBadKey), want: pf.ReasonSchema},
		{name: "another merge rule", err: fmt.Errorf("%w: %w", cassandra.ErrRejected, cassandra.ErrWrongMerge), want: pf.ReasonSchema},
		{name: "origin of another epoch", err: fmt.Errorf("%w: %w", cassandra.ErrRejected, cassandra.ErrEpochChanged), want: pf.ReasonRejected},
		{name: "Cassandra refused the write", err: fmt.Errorf("%w: writing a row: invalid", cassandra.ErrRejected), want: pf.ReasonRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rejectedReason(tc.err); got != tc.want {
				t.Errorf("rejectedReason = %s, want %s", got, tc.want)
			}
			// What the runtime counts the dead letter under.
			if got := pf.ReasonOf(pf.Permanent(pf.WithReason(rejectedReason(tc.err), tc.err))); got != tc.want {
				t.Errorf("the runtime counts it as %s, want %s", got, tc.want)
			}
		})
	}
}
