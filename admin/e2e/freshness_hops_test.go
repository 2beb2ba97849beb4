package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/envelope"
)

// hopTrace follows the paced events through the pipeline's topics: a
// reader on each stage's output topic notes when the output of each ledger
// event (by its origin position) arrived there and the publish time its
// producer gave it. With the sample's send, its ledger confirmation and its
// row's visibility, that splits published → visible into hops, so a stall
// or a slow median can be pinned on one stage.
type hopTrace struct {
	topics []string // stage outputs, in pipeline order
	mu     sync.Mutex
	seen   []map[envelope.Position]hopSeen // per topic: origin → first arrival
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// hopSeen is when a stage's output for one ledger event was published (by
// the stage's producer) and read back by the trace.
type hopSeen struct{ published, arrived time.Time }

// traceHops starts a reader at the end of each of topics.
func (s *shop) traceHops(b *testing.B, client pulsar.Client, topics ...string) *hopTrace {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	h := &hopTrace{topics: topics, cancel: cancel}
	for i, topic := range topics {
		h.seen = append(h.seen, map[envelope.Position]hopSeen{})
		reader, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.LatestMessageID()})
		if err != nil {
			cancel()
			b.Fatalf("reading %s: %v", topic, err)
		}
		h.done.Add(1)
		go func() {
			defer h.done.Done()
			defer reader.Close()
			for {
				msg, err := reader.Next(ctx)
				if err != nil {
					return
				}
				arrived := time.Now()
				origin, err := envelope.OriginFromProperties(msg.Properties())
				if err != nil {
					continue
				}
				h.mu.Lock()
				if _, ok := h.seen[i][origin.Position.Event()]; !ok {
					h.seen[i][origin.Position.Event()] = hopSeen{published: msg.PublishTime(), arrived: arrived}
				}
				h.mu.Unlock()
			}
		}()
	}
	return h
}

// stop ends the readers.
func (h *hopTrace) stop() {
	h.cancel()
	h.done.Wait()
}

// print splits the samples' published → visible time into hops and prints
// each hop's quantiles: send → ledger confirmed (the producer's batching and
// the broker's write), then per stage confirmed/arrived upstream → its output
// published (delivery and the stage's work until its batch opened) and
// published → arrived (its batching, the write, the delivery to a reader),
// and the last output's arrival → row visible (the sink and Cassandra).
func (h *hopTrace) print(samples []freshnessSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := []string{"send → ledger confirmed"}
	for _, t := range h.topics {
		short := t[len("persistent://"):]
		names = append(names, "→ "+short+" published", "→ "+short+" arrived")
	}
	names = append(names, "→ row visible")
	hops := make([][]time.Duration, len(names))
	traced := 0
	for _, s := range samples {
		if s.pos == (envelope.Position{}) {
			continue
		}
		at := []time.Time{s.sentAt, s.confirmed}
		complete := true
		for i := range h.topics {
			seen, ok := h.seen[i][s.pos]
			if !ok {
				complete = false
				break
			}
			at = append(at, seen.published, seen.arrived)
		}
		if !complete {
			continue
		}
		traced++
		at = append(at, s.sentAt.Add(s.visible))
		for i := range hops {
			hops[i] = append(hops[i], at[i+1].Sub(at[i]))
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "hop (%d samples traced)\tp50\tp90\tp99\tmax\t\n", traced)
	for i, name := range names {
		lat := hops[i]
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, quantile(lat, 0.5).Round(time.Millisecond), quantile(lat, 0.9).Round(time.Millisecond),
			quantile(lat, 0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	tw.Flush()
}

// cpuSampler notes, every second, how busy the machine's cores were (from
// /proc/stat) and how many tasks were runnable: the 1-minute load average
// is too slow to tell whether a stalled window coincided with someone
// else's CPU-heavy job on the shared cores.
type cpuSampler struct {
	mu      sync.Mutex
	start   time.Time
	samples []cpuSample
	cancel  context.CancelFunc
}

type cpuSample struct {
	at       time.Duration // since start
	busy     float64       // fraction of all cores busy over the last second
	runnable int           // procs_running
}

func sampleCPU(ctx context.Context, start time.Time) *cpuSampler {
	ctx, cancel := context.WithCancel(ctx)
	c := &cpuSampler{start: start, cancel: cancel}
	go everySecond(ctx, func(busy float64, runnable int) bool {
		c.mu.Lock()
		c.samples = append(c.samples, cpuSample{at: time.Since(start), busy: busy, runnable: runnable})
		c.mu.Unlock()
		return true
	})
	return c
}

// everySecond calls f with the fraction of all cores busy over each second
// (from /proc/stat) and the tasks runnable at its end, until ctx ends or f
// returns false.
func everySecond(ctx context.Context, f func(busy float64, runnable int) bool) {
	prevBusy, prevTotal, _ := readProcStat()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		busy, total, running := readProcStat()
		if total > prevTotal && !f(float64(busy-prevBusy)/float64(total-prevTotal), running) {
			return
		}
		prevBusy, prevTotal = busy, total
	}
}

// window returns the mean busy fraction and the most runnable tasks of the
// samples in [from, to).
func (c *cpuSampler) window(from, to time.Duration) (busy float64, runnable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.samples {
		if s.at >= from && s.at < to {
			busy += s.busy
			runnable = max(runnable, s.runnable)
			n++
		}
	}
	if n > 0 {
		busy /= float64(n)
	}
	return busy, runnable
}

// readProcStat returns the cores' busy and total jiffies and procs_running.
func readProcStat() (busy, total int64, running int) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 5 && f[0] == "cpu":
			for i, v := range f[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
				if i != 3 && i != 4 { // idle, iowait
					busy += n
				}
			}
		case len(f) == 2 && f[0] == "procs_running":
			running, _ = strconv.Atoi(f[1])
		}
	}
	return busy, total, running
}
