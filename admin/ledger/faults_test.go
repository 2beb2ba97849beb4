package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ledger"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
)

// TestOffloadMisconfiguredNamesTheSetting points a namespace's offload
// policy at a bucket that does not exist and at an endpoint nothing listens
// on: `ledger offload` must fail promptly with an error naming the setting,
// `ledger status` must show the broker's error, and nothing may be lost.
func TestOffloadMisconfiguredNamesTheSetting(t *testing.T) {
	tl := newTestLedger(t, "ledger-conf", 2000, 2, time.Hour)
	cases := []struct {
		name    string
		change  map[string]any
		wantErr error
		// wantInError is a piece of the error's text.
		wantInError string
		// brokerTried: the broker attempted the offload (so status shows its error).
		brokerTried bool
	}{
		{
			name:        "bucket that does not exist",
			change:      map[string]any{"managedLedgerOffloadBucket": "foldline-no-such-bucket"},
			wantErr:     ledger.ErrOffloadFailed,
			wantInError: "managedLedgerOffloadBucket",
			brokerTried: true,
		},
		{
			name:        "endpoint nothing listens on",
			change:      map[string]any{"managedLedgerOffloadServiceEndpoint": "http://127.0.0.1:9"},
			wantErr:     services.ErrUnreachable,
			wantInError: "managedLedgerOffloadServiceEndpoint",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := offloadPolicy(time.Hour)
			for k, v := range tc.change {
				policy[k] = v
			}
			tl.setPolicy(t, policy)

			_, err := ledger.Offload(context.Background(), tl.opts)
			t.Logf("offload: %v", err)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.wantInError) {
				t.Fatalf("offload error = %v; want %v naming %s", err, tc.wantErr, tc.wantInError)
			}
			st := tl.status(t)
			if st.Offloaded.Segments != 0 || st.Offloadable.Segments != 2 {
				t.Errorf("after the failed offload: %v offloaded, %v offloadable; want none and 2 segments", st.Offloaded, st.Offloadable)
			}
			if tc.brokerTried && (st.OffloadStatus != "ERROR" || st.LastError == "" || st.Setting != ledger.SettingBucket) {
				t.Errorf("status = %s, error %q, setting %q; want ERROR with the broker's error naming the bucket", st.OffloadStatus, st.LastError, st.Setting)
			}
		})
	}
	got, _ := tl.readAll(t, len(tl.lines))
	assertSameEvents(t, got, tl.lines)
}

// TestDisruptiveS3DownDuringOffload stops the shared S3 server: `ledger
// offload` refuses at once naming the endpoint; an offload the broker
// attempts anyway ends in an error that `ledger status` shows; the topic
// keeps taking and serving events; once the server is back, offload moves
// every closed segment and a reader from the first event gets every event.
func TestDisruptiveS3DownDuringOffload(t *testing.T) {
	testenv.Disruptive(t)
	tl := newTestLedger(t, "ledger-s3down", 3000, 3, 0)

	testenv.Stack(t, "down", "s3")
	t.Cleanup(func() { testenv.Stack(t, "up", "s3") })

	_, err := ledger.Offload(context.Background(), tl.opts)
	if !errors.Is(err, services.ErrUnreachable) || !strings.Contains(err.Error(), "managedLedgerOffloadServiceEndpoint") {
		t.Fatalf("offload with the S3 server down = %v; want unreachable naming managedLedgerOffloadServiceEndpoint", err)
	}

	// The server can also die after the check: ask the broker directly.
	before := tl.status(t)
	if err := tl.admin.Topics().OffloadWithContext(context.Background(), *tl.topic, ledger.OffloadTarget(before)); err != nil {
		t.Fatalf("triggering offload: %v", err)
	}
	var st ledger.TopicStatus
	testenv.WaitFor(t, 5*time.Minute, "the broker giving up the offload", func() bool {
		st = tl.status(t)
		return st.OffloadStatus == "ERROR"
	})
	t.Logf("broker's error: %s", st.LastError)
	if st.Setting != ledger.SettingEndpoint {
		t.Errorf("status names %q for error %q, want the endpoint", st.Setting, st.LastError)
	}

	tl.ingestMore(t, 1000)

	testenv.Stack(t, "up", "s3")
	results, err := ledger.Offload(context.Background(), tl.opts)
	if err != nil {
		t.Fatalf("offload with the S3 server back: %v", err)
	}
	after := tl.status(t)
	if after.Offloadable.Segments != 0 || after.Offloaded.Segments != 4 || after.OffloadStatus != "SUCCESS" {
		t.Errorf("after offload: %+v (results %+v); want 4 segments offloaded, none left, SUCCESS", after, results)
	}
	got, _ := tl.readAll(t, len(tl.lines))
	assertSameEvents(t, got, tl.lines)
}

func assertSameEvents(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d events, ingested %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("event %d read back as %q, ingested %q", i, got[i], want[i])
		}
	}
}

// setPolicy sets the namespace's offload policy and reloads the topic so
// that it takes effect at once.
func (tl *testLedger) setPolicy(t testing.TB, policy map[string]any) {
	t.Helper()
	ctx := context.Background()
	if err := setOffloadPolicy(ctx, tl.svc, tl.tenant+"/ledger", policy); err != nil {
		t.Fatalf("setting offload policy: %v", err)
	}
	if err := tl.admin.Topics().UnloadWithContext(ctx, *tl.topic); err != nil {
		t.Fatalf("unloading %s: %v", tl.topic, err)
	}
}

// ingestMore generates n more events (later in time than the first ones),
// ingests them as one more segment and adds them to the expected events.
func (tl *testLedger) ingestMore(t testing.TB, n int) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: n, Seed: 10, Start: gen.DefaultStart.Add(30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "more.jsonl")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tl.ingest(t, file)
	for _, line := range bytes.Split(bytes.TrimRight(buf.Bytes(), "\n"), []byte("\n")) {
		tl.lines = append(tl.lines, line)
	}
}
