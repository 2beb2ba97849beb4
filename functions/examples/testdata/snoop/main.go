// Command snoop is a hostile user-activity stage for the confinement test
// (TestFusedBackfillConfinesTheTenantsCode): for every event it tries to
// read a file anyone may read, to reach the broker over TCP and multipath
// TCP and the test's named Unix socket (Socket), and counts the variables of its environment other than the Go
// runtime's, and writes what it found as the row's key, so that the table a
// backfill writes shows what the tenant's code could do where it ran.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/run"
)

// broker is the local stack's Pulsar broker.
const broker = "127.0.0.1:6650"

// Socket is the named Unix socket the test listens on, anyone may connect
// to (as the Docker daemon's may be, or the user's D-Bus).
const Socket = "/tmp/foldline-e2e-snoop.sock"

// outcome is "refused" for an attempt that failed, "done" for one that
// worked.
func outcome(err error) string {
	if err != nil {
		return "refused"
	}
	return "done"
}

func dial(mptcp bool) error {
	d := net.Dialer{Timeout: time.Second}
	d.SetMultipathTCP(mptcp)
	c, err := d.DialContext(context.Background(), "tcp", broker)
	if err == nil {
		c.Close()
	}
	return err
}

// found is what the stage could do, as a row key.
func found() string {
	_, err := os.ReadFile("/etc/passwd")
	others := 0
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO") && !strings.HasPrefix(kv, "TZ=") {
			others++
		}
	}
	c, unixErr := net.DialTimeout("unix", Socket, time.Second)
	if unixErr == nil {
		c.Close()
	}
	return fmt.Sprintf("file %s, tcp %s, mptcp %s, unix %s, %d variables", outcome(err), outcome(dial(false)), outcome(dial(true)), outcome(unixErr), others)
}

func activity(in transform.Input[event.Event]) ([]transform.Output, error) {
	return []transform.Output{transform.Row(useractivity.View, useractivity.ColUser, found()).
		Apply(transform.Add(useractivity.ColPageViews, 1)).At(in.Event.Time)}, nil
}

func main() { run.Main(transform.New(event.Parse, activity)) }
