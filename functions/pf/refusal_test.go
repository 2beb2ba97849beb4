package pf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/pf/internal/instancepb"
	"github.com/foldline/foldline/internal/testenv"
)

// An instance that cannot start stays up and says why on its control port,
// where the worker's functions status reads it: not running, the reason as
// its failure and as its latest system exception. A config it refuses is
// returned once the instance is stopped; one that cannot connect is tried
// again meanwhile, and its stop is a clean one.
func TestInstanceThatCannotStartSaysWhy(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]any
		// want is in the status's failure; wantErr is Run's error after
		// the stop.
		want    string
		wantErr error
	}{
		{
			name: "no token of its own on a Pulsar with authentication",
			conf: map[string]any{
				"clientAuthenticationPlugin":     "org.apache.pulsar.client.impl.auth.AuthenticationToken",
				"clientAuthenticationParameters": "file:///worker/superuser.token",
			},
			want:    "refusing to run with the worker's credentials",
			wantErr: pf.ErrWorkerCredentials,
		},
		{
			name:    "a user config it refuses",
			conf:    map[string]any{"userConfig": `{"maxRetries":"many"}`},
			want:    `user config key "maxRetries"`,
			wantErr: pf.ErrBadConfig,
		},
		{
			name: "a broker it cannot reach",
			conf: map[string]any{"pulsarServiceURL": "nowhere://broker"},
			want: "creating pulsar client for nowhere://broker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			conf := map[string]any{"pulsarServiceURL": "pulsar://127.0.0.1:1", "port": port, "metricsPort": freePort(t),
				"tenant": "t", "nameSpace": "n", "name": "f", "sourceSpecsTopic": "persistent://t/n/in"}
			for k, v := range tt.conf {
				conf[k] = v
			}
			raw, err := json.Marshal(conf)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			done := make(chan error, 1)
			go func() {
				done <- pf.Run(ctx, func(in []byte) ([]byte, error) { return in, nil }, []string{"-instance-conf", string(raw)})
			}()

			conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			control := instancepb.NewInstanceControlClient(conn)
			var status *instancepb.FunctionStatus
			testenv.WaitFor(t, time.Minute, "the instance's status to say why it does not run", func() bool {
				select {
				case err := <-done:
					t.Fatalf("Run returned %v before it was stopped", err)
				default:
				}
				status, err = control.GetFunctionStatus(t.Context(), &emptypb.Empty{})
				return err == nil && status.FailureException != ""
			})
			if status.Running || !strings.Contains(status.FailureException, tt.want) {
				t.Errorf("status running %v, failure %q; want not running, a failure saying %q", status.Running, status.FailureException, tt.want)
			}
			if n := len(status.LatestSystemExceptions); n == 0 || status.LatestSystemExceptions[n-1].ExceptionString != status.FailureException {
				t.Errorf("latest system exceptions %v, want the failure %q last", status.LatestSystemExceptions, status.FailureException)
			}
			stop()
			select {
			case err := <-done:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Run after the stop: %v, want %v", err, tt.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within the worker's 10 s grace after the stop")
			}
		})
	}
}
