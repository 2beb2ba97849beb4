package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
)

// TestSoak runs the shop for a long while at half of its saturation, with
// an instance of a random stage killed (kill -9) every minute and Cassandra
// restarted every 10 minutes (issue 45, item 5), and records the resident
// memory (VmRSS) of every process it runs on, every 30 s: the broker's JVM
// (with its functions worker), Cassandra's, the S3 server's, and each
// function instance's, by name (an instance started again after a kill is
// a new process under the same name). At the end the views equal the fold
// of the ledger, and the dead-letter topics hold, by content, exactly the
// malformed events (validate's) and nothing else; the memory is reported,
// not judged: a table of every sample and, per process, the median of the
// first 5 minutes against that of the last 5 (a fifth of the run each
// when it is shorter than 25 minutes), as a growth in per cent.
//
// It runs only when FOLDLINE_SOAK_MINUTES is set (scripts/soak runs the
// 30 minutes). The rest is optional:
//
//	FOLDLINE_SOAK_KILL_EVERY     1m   between two kills
//	FOLDLINE_SOAK_RESTART_EVERY  10m  between two Cassandra restarts
//	FOLDLINE_SOAK_SAMPLE_EVERY   30s  between two memory samples
//	FOLDLINE_SOAK_RATE           events/s; unset: half of the saturation
//	                             that a burst measures first
//	FOLDLINE_SOAK_BURST          100000 events of that burst
//	FOLDLINE_SOAK_CASSANDRA      stack (default): the stack's Cassandra,
//	                             stopped and started with scripts/stack as
//	                             TestDisruptiveShopViewsSurviveCassandraRestart
//	                             does, so only with FOLDLINE_DISRUPTIVE_TESTS=1
//	                             and nothing else using the stack; cluster:
//	                             the two-node cluster of
//	                             scripts/cassandra-cluster (keyspace with
//	                             replication factor 2), its nodes restarted in
//	                             turn, which leaves the stack's Cassandra alone
//	FOLDLINE_SOAK_OUT            folder of the memory table (rss.txt);
//	                             default a temporary folder, printed
//
// The events come from the generator as the soak goes, 10 s worth at a
// time, each batch with ids of its own, and are written at the rate, as
// they are due, to a live `foldline ingest -` (ingest.Run reading a pipe):
// the ledger gets them as an application's producer would send them. The
// test keeps every event in memory for the fold (about 200 bytes each: at
// 14 000 events/s, 30 minutes hold 25 million, 5 GB).
//
//	FOLDLINE_SOAK_MINUTES=30 FOLDLINE_DISRUPTIVE_TESTS=1 go test ./admin/e2e -run 'TestSoak$' -v -timeout 3h
func TestSoak(t *testing.T) {
	minutes := testenv.EnvInt(t, "FOLDLINE_SOAK_MINUTES", 0)
	if minutes <= 0 {
		t.Skip("set FOLDLINE_SOAK_MINUTES to run the soak (scripts/soak runs 30 minutes)")
	}
	cfg := soakConfig{
		duration:     time.Duration(minutes) * time.Minute,
		killEvery:    testenv.EnvDuration(t, "FOLDLINE_SOAK_KILL_EVERY", time.Minute),
		restartEvery: testenv.EnvDuration(t, "FOLDLINE_SOAK_RESTART_EVERY", 10*time.Minute),
		sampleEvery:  testenv.EnvDuration(t, "FOLDLINE_SOAK_SAMPLE_EVERY", 30*time.Second),
		rate:         float64(testenv.EnvInt(t, "FOLDLINE_SOAK_RATE", 0)),
		burst:        testenv.EnvInt(t, "FOLDLINE_SOAK_BURST", 100_000),
		out:          os.Getenv("FOLDLINE_SOAK_OUT"),
	}
	if cfg.out == "" {
		cfg.out = t.TempDir()
	}
	cass := soakCassandra(t, os.Getenv("FOLDLINE_SOAK_CASSANDRA"))
	s := deployShopFrom(t, "soak", cass.manifests(t))
	// Every stage started, subscribed and past its first batch.
	s.ingest(t, generate(t, 2000, 51))
	s.waitForFold(t, 5*time.Minute)

	var sat saturation
	if cfg.rate == 0 {
		sat = s.measureSaturation(t, cfg.burst, 52)
		cfg.rate = sat.rate / 2
		t.Logf("saturation: %d events, views caught up after %s: %.0f events/s; the soak publishes at half, %.0f events/s",
			cfg.burst, sat.caughtUp.Round(10*time.Millisecond), sat.rate, cfg.rate)
		settled, calm := settle(t.Context())
		t.Logf("after the burst, waited %s for the cores to calm down (calm: %v)", settled.Round(time.Second), calm)
	}

	rss := startRSS(t.Context(), cfg.sampleEvery, func() map[string]int { return soakProcesses(s.tenant, cass) })
	feed := s.startFeed(t, cfg.rate, cfg.duration, 1000)
	kills, restarts := 0, 0
	// The memory is reported however the soak ends.
	defer func() {
		feed.cancel() // a no-op once it has ended; else the soak failed
		<-feed.done
		rss.stop()
		var buf bytes.Buffer
		measured := "a rate given, saturation not measured"
		if sat.rate > 0 {
			measured = fmt.Sprintf("%.2f of the saturation of %.0f events/s", feed.rate()/sat.rate, sat.rate)
		}
		fmt.Fprintf(&buf, "soak of %s: %d events at %.0f events/s (%s), %d kills (every %s), %d restarts of %s (every %s); RSS every %s, MB\n\n",
			cfg.duration, len(feed.lines), feed.rate(), measured, kills, cfg.killEvery, restarts, cass.name, cfg.restartEvery, cfg.sampleEvery)
		figures := rss.write(&buf, min(5*time.Minute, cfg.duration/5))
		path := filepath.Join(cfg.out, "rss.txt")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Errorf("writing the memory table: %v", err)
		}
		t.Logf("memory of every process over the soak (also in %s):\n%s", path, buf.String())
		if err := benchreport.Emit(figures...); err != nil {
			t.Error(err)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 45))
	stages := s.stageNames(t)
	nextKill, nextRestart := feed.start.Add(cfg.killEvery), feed.start.Add(cfg.restartEvery)
	end := feed.start.Add(cfg.duration)
	for {
		next := nextKill
		if nextRestart.Before(next) {
			next = nextRestart
		}
		if next.After(end) {
			break
		}
		time.Sleep(time.Until(next))
		if !nextRestart.After(time.Now()) {
			began := time.Now()
			what := cass.restart(t, restarts)
			restarts++
			t.Logf("%s: restarted %s in %s", time.Since(feed.start).Round(time.Second), what, time.Since(began).Round(time.Second))
			nextRestart = nextRestart.Add(cfg.restartEvery)
		}
		if !nextKill.After(time.Now()) {
			s.killOneInstance(t, stages[rng.IntN(len(stages))], rng)
			kills++
			nextKill = nextKill.Add(cfg.killEvery)
		}
	}
	s.awaitFeed(t, feed)
	published := time.Now()
	t.Logf("published %d events in %s (%.0f events/s, aim %.0f); %d kills, %d Cassandra restarts",
		len(feed.lines), feed.took.Round(time.Second), feed.rate(), cfg.rate, kills, restarts)
	rss.markEnd()

	s.waitForFold(t, 30*time.Minute)
	t.Logf("the views caught up %s after the last event was published", time.Since(published).Round(time.Second))
	want := s.expected()
	malformed := make([][]byte, len(want.Rejected))
	for i, n := range want.Rejected {
		malformed[i] = s.ledger[n]
	}
	unknownOrders := make([][]byte, len(want.UnknownOrders))
	for i, n := range want.UnknownOrders {
		unknownOrders[i] = s.ledger[n]
	}
	s.checkDeadLetters(t, map[string][][]byte{"validate-dlq": malformed, "sku-refunds-dlq": unknownOrders})

}

// soakConfig is TestSoak's settings.
type soakConfig struct {
	duration, killEvery, restartEvery, sampleEvery time.Duration
	rate                                           float64
	burst                                          int
	out                                            string
}

// soakTarget is the Cassandra the soak restarts.
type soakTarget struct {
	name string
	// manifests are the shop manifests to deploy against it.
	manifests func(t *testing.T) string
	// restart stops Cassandra (or the i-th restart's node) and starts it
	// again; it returns what it restarted.
	restart func(t *testing.T, i int) string
	// pidFiles are the pid files of its processes, by name.
	pidFiles map[string]string
}

// soakCassandra returns the target FOLDLINE_SOAK_CASSANDRA names.
func soakCassandra(t *testing.T, which string) soakTarget {
	t.Helper()
	switch which {
	case "", "stack":
		if os.Getenv(testenv.DisruptiveEnv) != "1" {
			t.Skipf("restarts the stack's Cassandra: run it alone on the stack with %s=1 (scripts/soak does), or with FOLDLINE_SOAK_CASSANDRA=cluster", testenv.DisruptiveEnv)
		}
		return soakTarget{
			name:      "the stack's Cassandra",
			manifests: func(*testing.T) string { return testenv.ShopManifestsDir() },
			restart: func(t *testing.T, _ int) string {
				testenv.Stack(t, "down", "cassandra")
				testenv.Stack(t, "up", "cassandra")
				return "the stack's Cassandra"
			},
			pidFiles: map[string]string{"cassandra": testenv.ServicePIDFile("cassandra")},
		}
	case "cluster":
		useCassandraCluster(t)
		nodes := []string{"b", "a"}
		files := map[string]string{}
		for _, n := range nodes {
			files["cassandra-"+n] = filepath.Join(services.StackDir(), "cassandra-cluster", n, "cassandra.pid")
		}
		return soakTarget{
			name: "a node of the two-node cluster",
			// With replication factor 2 on two nodes, every write at
			// LOCAL_QUORUM needs both: a node's restart stalls the whole
			// pipeline, as the restart of a single node does.
			manifests: func(t *testing.T) string {
				dir := testenv.ShopManifests(t)
				editFile(t, filepath.Join(dir, "tenant.yaml"), `replication_factor: "1"`, `replication_factor: "2"`)
				return dir
			},
			restart: func(t *testing.T, i int) string {
				node := nodes[i%len(nodes)]
				cassandraCluster(t, "down", node)
				cassandraCluster(t, "up", node)
				return "cassandra-" + node
			},
			pidFiles: files,
		}
	default:
		t.Fatalf("FOLDLINE_SOAK_CASSANDRA=%q: want stack or cluster", which)
		return soakTarget{}
	}
}

// soakProcesses returns the pid of every process the soak runs on, by
// name: the stack's services, the target's Cassandra and the tenant's
// function instances (a function's name, with /N for an instance other
// than the first). A process that is not running (Cassandra while it
// restarts) is left out.
func soakProcesses(tenant string, cass soakTarget) map[string]int {
	files := maps.Clone(cass.pidFiles)
	for _, svc := range []string{"pulsar", "s3"} {
		files[svc] = testenv.ServicePIDFile(svc)
	}
	pids := map[string]int{}
	for name, file := range files {
		if pid, err := testenv.ReadPIDFile(file); err == nil {
			pids[name] = pid
		}
	}
	for _, inst := range testenv.Instances(tenant, pipelineNS) {
		name := inst.Function
		if inst.Index != "0" {
			name += "/" + inst.Index
		}
		pids[name] = inst.PID
	}
	return pids
}

// feed is the soak's producer: generated events written at a rate to a
// live `foldline ingest -`.
type feed struct {
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	// Once done: the lines written, in order, how long it took, and the
	// first error of the generator, the pipe or the ingest.
	lines     [][]byte
	took      time.Duration
	published int64
	err       error
}

// startFeed publishes generated events to the ledger at rate events per
// second for d, with `foldline ingest -` reading them from a pipe as they
// come. The events are generated 10 s worth at a time, the n-th batch from
// seed+n (ids of its own).
func (s *shop) startFeed(t *testing.T, rate float64, d time.Duration, seed uint64) *feed {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	f := &feed{start: time.Now(), cancel: cancel, done: make(chan struct{})}
	var (
		wg                  sync.WaitGroup
		writeErr, ingestErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		res, err := ingest.Run(ctx, ingest.Options{Services: s.svc, Tenant: s.tenant, Files: []string{"-"}, Stdin: pr})
		if err == nil {
			f.published = res[0].Published
		} else {
			ingestErr = fmt.Errorf("ingesting the soak's events: %w", err)
			cancel()
		}
		pr.CloseWithError(err) // the writer stops when the ingest does
	}()
	go func() {
		defer wg.Done()
		f.lines, writeErr = writePaced(ctx, pw, rate, f.start, d, seed)
		pw.CloseWithError(writeErr)
		f.took = time.Since(f.start)
	}()
	go func() {
		wg.Wait()
		f.err = errors.Join(writeErr, ingestErr)
		close(f.done)
	}()
	return f
}

// writePaced writes generated events to w, each once it is due (the i-th
// at start + i/rate), until d has passed, and returns those written.
func writePaced(ctx context.Context, w io.Writer, rate float64, start time.Time, d time.Duration, seed uint64) ([][]byte, error) {
	batch := max(1000, int(rate*10))
	var (
		written [][]byte
		buf     bytes.Buffer
	)
	for n := uint64(0); ; n++ {
		lines, err := generateLines(batch, seed+n)
		if err != nil {
			return written, err
		}
		for len(lines) > 0 {
			elapsed := time.Since(start)
			if elapsed >= d {
				return written, nil
			}
			due := int(elapsed.Seconds()*rate) - len(written)
			if due <= 0 {
				select {
				case <-ctx.Done():
					return written, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			due = min(due, len(lines))
			buf.Reset()
			for _, l := range lines[:due] {
				buf.Write(l)
				buf.WriteByte('\n')
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return written, fmt.Errorf("writing events to the ingest: %w", err)
			}
			written = append(written, lines[:due]...)
			lines = lines[due:]
		}
	}
}

// awaitFeed waits for the feed to end, checks that every line written was
// published, and adds them to the shop's ledger.
func (s *shop) awaitFeed(t *testing.T, f *feed) {
	t.Helper()
	<-f.done
	if f.err != nil {
		t.Fatal(f.err)
	}
	if f.published != int64(len(f.lines)) {
		t.Fatalf("the ingest published %d of the %d events written to it", f.published, len(f.lines))
	}
	s.ledger = append(s.ledger, f.lines...)
}

// rate is the events per second the feed published.
func (f *feed) rate() float64 { return float64(len(f.lines)) / f.took.Seconds() }

// checkDeadLetters reads every dead-letter topic of the pipeline namespace
// and checks that each holds, by content, exactly the lines want gives
// for it (by the topic's local name), and that the others hold nothing. A
// dead letter may come twice (its stage was killed after it published it
// and before it acknowledged the event, which then came again): copies
// are counted and reported, not failed.
func (s *shop) checkDeadLetters(t *testing.T, want map[string][][]byte) {
	t.Helper()
	admin := s.pulsarAdmin(t)
	ns, err := utils.GetNameSpaceName(s.tenant, pipelineNS)
	if err != nil {
		t.Fatal(err)
	}
	_, topics, err := admin.Topics().List(*ns)
	if err != nil {
		t.Fatalf("listing the topics of %s: %v", ns, err)
	}
	for name, lines := range want {
		if len(lines) > 0 { // expected: missing, it fails below
			topics = append(topics, "persistent://"+s.tenant+"/"+pipelineNS+"/"+name)
		}
	}
	slices.Sort(topics)
	for _, topic := range slices.Compact(topics) {
		tn, err := utils.GetTopicName(topic)
		if err != nil {
			t.Fatal(err)
		}
		local := tn.GetLocalName()
		if !strings.HasSuffix(local, "-dlq") {
			continue
		}
		expected := map[string]bool{}
		for _, l := range want[local] {
			expected[string(l)] = true
		}
		got, letters := s.readDeadLetters(t, topic, expected)
		var missing, unexpected []string
		for l := range expected {
			if got[l] == 0 {
				missing = append(missing, l)
			}
		}
		for l := range got {
			if !expected[l] {
				unexpected = append(unexpected, l)
			}
		}
		if len(missing) > 0 || len(unexpected) > 0 {
			t.Errorf("%s: %d dead letters (%d distinct), want the %d lines: %d missing (e.g. %.200q), %d unexpected (e.g. %.200q)",
				local, letters, len(got), len(expected), len(missing), first(missing), len(unexpected), first(unexpected))
			continue
		}
		t.Logf("%s: %d dead letters, exactly the %d lines expected by content (%d copies of a letter published again)", local, letters, len(expected), letters-len(got))
	}
}

// readDeadLetters reads topic from its first message until every line of
// want has come (or 3 minutes have passed) and nothing more comes for 5 s;
// it returns how often each payload came, and how many messages.
func (s *shop) readDeadLetters(t *testing.T, topic string, want map[string]bool) (map[string]int, int) {
	t.Helper()
	reader := s.readFromEarliest(t, topic)
	got, n, seen := map[string]int{}, 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		msg, err := reader.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			if seen == len(want) || time.Now().After(deadline) {
				return got, n
			}
			continue
		}
		if err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		n++
		p := string(msg.Payload())
		if got[p] == 0 && want[p] {
			seen++
		}
		got[p]++
	}
}

// first returns the first of ss in order, "" when there is none.
func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return slices.Min(ss)
}

// rssSample is the memory of every process at one time.
type rssSample struct {
	at time.Duration // since the sampling started
	// after is set on samples taken once the feed ended (the views
	// catching up).
	after bool
	kb    map[string]int64 // VmRSS by process name
}

// rssRecorder samples the VmRSS of the soak's processes.
type rssRecorder struct {
	mu      sync.Mutex
	samples []rssSample
	pids    map[string]map[int]bool // every pid seen under each name
	ended   bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// startRSS samples the resident memory of the processes that processes
// returns, at once and then every period, until stop.
func startRSS(ctx context.Context, period time.Duration, processes func() map[string]int) *rssRecorder {
	ctx, cancel := context.WithCancel(ctx)
	r := &rssRecorder{pids: map[string]map[int]bool{}, cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(r.done)
		for {
			sample := rssSample{at: time.Since(start), kb: map[string]int64{}}
			r.mu.Lock()
			sample.after = r.ended
			for name, pid := range processes() {
				if kb := proc.RSSKB(pid); kb > 0 {
					sample.kb[name] = kb
					if r.pids[name] == nil {
						r.pids[name] = map[int]bool{}
					}
					r.pids[name][pid] = true
				}
			}
			r.samples = append(r.samples, sample)
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(period - time.Since(start)%period):
			}
		}
	}()
	return r
}

// markEnd notes that the feed has ended: later samples are of the views
// catching up, left out of the growth figures.
func (r *rssRecorder) markEnd() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
}

// stop ends the sampling.
func (r *rssRecorder) stop() {
	r.cancel()
	<-r.done
}

// write writes the samples as a table (a row per sample, a column per
// process, MB) under a summary (a row per process: how many processes ran
// under its name, the median of the first and of the last window of the
// feed, the growth between them, the most), and returns the summary as
// bench figures.
func (r *rssRecorder) write(w io.Writer, window time.Duration) []benchreport.Figure {
	names := slices.Sorted(maps.Keys(r.pids))
	var during []rssSample
	for _, s := range r.samples {
		if !s.after {
			during = append(during, s)
		}
	}
	var figures []benchreport.Figure
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "process\tprocesses\tfirst %s, median\tlast %s, median\tgrowth\tmost\t\n", window, window)
	for _, name := range names {
		var firstKB, lastKB []int64
		var most int64
		for _, s := range during {
			kb, ok := s.kb[name]
			if !ok {
				continue
			}
			most = max(most, kb)
			if s.at <= window {
				firstKB = append(firstKB, kb)
			}
			if s.at >= during[len(during)-1].at-window {
				lastKB = append(lastKB, kb)
			}
		}
		if len(firstKB) == 0 || len(lastKB) == 0 {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t%.0f\t\n", name, len(r.pids[name]), mb(most))
			continue
		}
		a, b := median(firstKB), median(lastKB)
		growth := 100 * float64(b-a) / float64(a)
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%+.1f%%\t%.0f\t\n", name, len(r.pids[name]), mb(a), mb(b), growth, mb(most))
		figures = append(figures, benchreport.Figure{Bench: "soak", Figure: "RSS of " + name + ", last median", Value: mb(b), Unit: "MB"}.Against("first median", mb(a)))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRSS in MB every sample (* once the feed had ended, the views catching up):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "time\t%s\t\n", strings.Join(names, "\t"))
	for _, s := range r.samples {
		row := []string{s.at.Round(time.Second).String()}
		if s.after {
			row[0] += "*"
		}
		for _, name := range names {
			if kb, ok := s.kb[name]; ok {
				row = append(row, fmt.Sprintf("%.0f", mb(kb)))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	return figures
}

// mb converts kB to MB.
func mb(kb int64) float64 { return float64(kb) / 1024 }

// median returns the median of kbs (the lower middle of an even count).
func median(kbs []int64) int64 {
	s := slices.Sorted(slices.Values(kbs))
	return s[(len(s)-1)/2]
}

// TestRSSReport checks the soak's memory summary on made-up samples (no
// stack): medians of the first and last windows of the feed, the samples
// after it left out, a process that came and went counted.
func TestRSSReport(t *testing.T) {
	r := &rssRecorder{pids: map[string]map[int]bool{"pulsar": {1: true}, "validate": {2: true, 3: true}}}
	for i, kb := range []int64{100, 300, 200, 400, 500, 700, 600, 9000} {
		s := rssSample{at: time.Duration(i) * 30 * time.Second, after: i == 7, kb: map[string]int64{"pulsar": kb * 1024}}
		if i != 3 {
			s.kb["validate"] = 50 * 1024
		}
		r.samples = append(r.samples, s)
	}
	var out bytes.Buffer
	figures := r.write(&out, time.Minute)
	// The feed's samples are at 0 to 3 min: the first minute holds 100,
	// 300, 200 (median 200), the last 500, 700, 600 (median 600).
	want := []benchreport.Figure{
		{Bench: "soak", Figure: "RSS of pulsar, last median", Value: 600, Unit: "MB"},
		{Bench: "soak", Figure: "RSS of validate, last median", Value: 50, Unit: "MB"},
	}
	want[0] = want[0].Against("first median", 200)
	want[1] = want[1].Against("first median", 50)
	if !slices.Equal(figures, want) {
		t.Errorf("figures %+v, want %+v", figures, want)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "+200.0%") || !strings.Contains(out.String(), "3m30s*") {
		t.Errorf("the report shows no growth of +200.0%% or no sample after the feed:\n%s", out.String())
	}
}
