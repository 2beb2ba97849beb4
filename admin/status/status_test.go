package status_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
)

func TestGetErrors(t *testing.T) {
	manifests := testenv.ShopManifestsDir()
	cases := []struct {
		name     string
		services func(t *testing.T) services.Services
		tenant   string
		wantErr  error
		wantCode int
		wantText string
	}{
		{
			name: "service unreachable names the start script",
			services: func(*testing.T) services.Services {
				return services.Services{PulsarURL: "pulsar://127.0.0.1:1", PulsarAdminURL: "http://127.0.0.1:1", CassandraHost: "127.0.0.1:1"}
			},
			tenant:   "shop",
			wantErr:  services.ErrUnreachable,
			wantCode: exitcode.Unreachable,
			wantText: "scripts/stack up",
		},
		{
			name:     "unknown tenant",
			services: func(t *testing.T) services.Services { return testenv.Pulsar(t) },
			tenant:   fmt.Sprintf("fltest-nosuch-%d", time.Now().UnixNano()%1_000_000),
			wantErr:  exitcode.ErrNotFound,
			wantCode: exitcode.NotFound,
			wantText: "does not exist",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := status.Get(t.Context(), status.Options{Command: target.Command{Dir: manifests, Target: target.Flags{Tenant: tc.tenant}, Services: tc.services(t)}})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if code := exitcode.For(err); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
		})
	}
}

// The rows status shows are estimated, and say so in the text and the
// JSON; a count appears only where CountRows asked for one.
func TestRowsAreLabelledEstimated(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	estimated, counted := int64(5314), int64(5400)
	report := &status.Report{Tenant: "shop", Keyspace: "shop", Views: []status.ViewStatus{
		{View: "user_activity", Keyspace: "shop", Table: "user_activity_v1", RowsEstimated: &estimated, NewestEvent: now.Add(-time.Minute)},
		{View: "product_sales", Keyspace: "shop", Table: "product_sales_v1", RowsEstimated: &estimated, Rows: &counted},
		{View: "windowed", Keyspace: "shop"},
	}}
	var text strings.Builder
	report.Write(&text, now)
	for _, want := range []string{"ROWS (ESTIMATED)", "5314", "5400 (counted)", "1m0s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	body, err := json.Marshal(report.Views)
	if err != nil {
		t.Fatal(err)
	}
	var views []map[string]any
	if err := json.Unmarshal(body, &views); err != nil {
		t.Fatal(err)
	}
	if views[0]["rowsEstimated"] != 5314.0 || views[0]["rows"] != nil || views[1]["rows"] != 5400.0 || views[2]["rowsEstimated"] != nil {
		t.Errorf("JSON views %s: want rowsEstimated, and rows only where counted", body)
	}
}
