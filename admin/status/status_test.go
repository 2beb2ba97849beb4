package status_test

import (
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
