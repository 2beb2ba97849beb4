package e2e

import (
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/sinks/cassandra"
)

// TestLocalRunConfinesTheTenantsCode runs the shop's user_activity path on
// this machine, as the fused backfill, foldline verify and foldline
// training-set do, with user-activity replaced by a hostile stage
// (functions/examples/testdata/snoop) that tries, for every event, to read a file anyone may
// read, to reach the broker over TCP and multipath TCP and a named Unix
// socket anyone may connect to, and counts the
// variables of its environment besides the Go runtime's: each row it makes
// says it could do none of it (package sandbox), though this test, as the
// caller, can do all of it.
func TestLocalRunConfinesTheTenantsCode(t *testing.T) {
	s := deployShop(t, "confine")
	s.ingest(t, generate(t, 300, 71))
	s.waitForFold(t, 3*time.Minute)

	// What the caller can do, which the stage must not.
	if _, err := os.ReadFile("/etc/passwd"); err != nil {
		t.Fatalf("the caller cannot read /etc/passwd either: %v", err)
	}
	conn, err := net.DialTimeout("tcp", "127.0.0.1:6650", 5*time.Second)
	if err != nil {
		t.Fatalf("the caller cannot reach the broker either: %v", err)
	}
	conn.Close()
	os.Remove(snoopSocket) // a run's that was killed
	unix, err := net.Listen("unix", snoopSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	if err := os.Chmod(snoopSocket, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FOLDLINE_PULSAR_TOKEN", "a token the tenant's code must not see")

	cmd := s.opts.Command
	cmd.Dir = manifestsWithBinary(t, "user-activity", "github.com/foldline/foldline/functions/examples/testdata/snoop")
	job, err := localrun.Open(t.Context(), cmd, "user_activity", s.opts.CacheDir)
	if err != nil {
		t.Fatalf("opening the local run: %v", err)
	}
	found := map[string]int{}
	if _, err := job.OverLedger(t.Context(), func([]localrun.Message) {}, func(op cassandra.Op, _ localrun.Message) error {
		for _, kv := range op.View.Key {
			var user string
			if err := json.Unmarshal(kv.Value, &user); err != nil {
				return err
			}
			found[user]++
		}
		return nil
	}); err != nil {
		t.Fatalf("running the path locally: %v", err)
	}
	const want = "file refused, tcp refused, mptcp refused, unix refused, 0 variables"
	if len(found) != 1 || found[want] == 0 {
		t.Fatalf("the stage found %v, want only %q", found, want)
	}
	t.Logf("%d events: %q", found[want], want)
}

// snoopSocket is functions/examples/testdata/snoop's Socket.
const snoopSocket = "/tmp/foldline-e2e-snoop.sock"
