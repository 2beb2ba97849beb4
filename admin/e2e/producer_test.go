package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/client"
	"github.com/foldline/foldline/internal/testenv"
)

// producerChildEnv names the folder of a live producer run as a child
// process by TestLiveProducerSurvivesRestarts: its events and checkpoint.
const producerChildEnv = "FOLDLINE_PRODUCER_CHILD_DIR"

// TestLiveProducerSurvivesRestarts runs an application that publishes the
// shop's events with package client, as a process of its own, and kills it
// (kill -9) three times mid-stream; each time it starts again from its own
// checkpoint — the last event before which all were confirmed, recorded
// now and then — and publishes from there, events the ledger already holds
// included. The views equal the fold of the ledger's distinct events.
func TestLiveProducerSurvivesRestarts(t *testing.T) {
	s := deployShop(t, "live")
	var events [][]byte
	for _, line := range generate(t, 6000, 91) {
		// A live producer refuses an event without an id: leave those out.
		if f, err := client.Fields(line, "id", "user", "time"); err == nil && f.ID != "" {
			events = append(events, line)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), bytes.Join(events, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	checkpoint := func() int {
		data, _ := os.ReadFile(filepath.Join(dir, "checkpoint"))
		n, _ := strconv.Atoi(string(data))
		return n
	}
	for round := 0; ; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLiveProducerChild$", "-test.v")
		cmd.Env = append(os.Environ(), producerChildEnv+"="+dir, "FOLDLINE_PRODUCER_TENANT="+s.tenant)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the producer's last run: %v\n%s", err, out.String())
			}
			break
		}
		from := checkpoint()
		testenv.WaitFor(t, time.Minute, "the producer going on past its checkpoint", func() bool { return checkpoint() >= from+1000 })
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		t.Logf("killed the producer at checkpoint %d of %d", checkpoint(), len(events))
	}
	s.ledger = s.readLedger(t)
	if len(s.ledger) <= len(events) {
		t.Errorf("the ledger holds %d events for %d distinct: the restarts published nothing again", len(s.ledger), len(events))
	}
	s.waitForFold(t, 5*time.Minute)
	t.Logf("%d distinct events, %d in the ledger", len(events), len(s.ledger))
}

// TestLiveProducerChild is the application TestLiveProducerSurvivesRestarts
// runs and kills: it publishes the events of its folder from its
// checkpoint on, about 3000 a second, and records as its checkpoint the
// number of events all confirmed, every 100.
func TestLiveProducerChild(t *testing.T) {
	dir := os.Getenv(producerChildEnv)
	if dir == "" {
		t.Skip("run by TestLiveProducerSurvivesRestarts")
	}
	data, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	events := bytes.Split(data, []byte("\n"))
	from := 0
	if cp, err := os.ReadFile(filepath.Join(dir, "checkpoint")); err == nil {
		from, _ = strconv.Atoi(string(cp))
	}
	svc := testenv.Pulsar(t)
	pc, err := pulsar.NewClient(svc.PulsarClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p, err := client.New(client.Options{Client: pc, Topic: ingest.DefaultTopic(os.Getenv("FOLDLINE_PRODUCER_TENANT"))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var (
		mu        sync.Mutex
		confirmed = map[int]bool{}
		next      = from // all before it confirmed
	)
	for i := from; i < len(events); i++ {
		p.PublishAsync(context.Background(), events[i], func(err error) {
			if err != nil {
				t.Errorf("event %d: %v", i, err) // the next run publishes it again
				return
			}
			mu.Lock()
			defer mu.Unlock()
			confirmed[i] = true
			for confirmed[next] {
				delete(confirmed, next)
				next++
				if next%100 == 0 {
					_ = os.WriteFile(filepath.Join(dir, "checkpoint"), []byte(fmt.Sprint(next)), 0o644)
				}
			}
		})
		if i%30 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// readLedger returns every event of the ledger, in ledger order.
func (s *shop) readLedger(t *testing.T) [][]byte {
	t.Helper()
	reader := s.readFromEarliest(t, ingest.DefaultTopic(s.tenant))
	var lines [][]byte
	for reader.HasNext() {
		msg, err := reader.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, msg.Payload())
	}
	return lines
}
