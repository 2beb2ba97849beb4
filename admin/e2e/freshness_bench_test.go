package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/testenv"
)

const (
	// freshnessSamplesPerSecond is how many of the paced events are
	// followed to their row: enough for a p99 over a minute, few enough
	// that polling their rows costs Cassandra little.
	freshnessSamplesPerSecond = 20
	// freshnessPoll is how often the rows of the samples still waiting are
	// read (one query for all, appliedWatch): the resolution of the
	// figures, with the read's own time.
	freshnessPoll = 10 * time.Millisecond
	// freshnessGiveUp bounds the wait for one sample's row.
	freshnessGiveUp = 2 * time.Minute
	// freshnessAim is issue 15's aim for the p99.
	freshnessAim = "< 250 ms"
)

// BenchmarkFreshness measures how soon an event published to the ledger is
// visible in its user_activity row, through the whole shop pipeline
// (ledger → validate → user-activity → sink → Cassandra, product_sales's
// branch running beside it), at half of the pipeline's saturation.
//
// Saturation is measured first, in the same run: a burst of
// FOLDLINE_FRESHNESS_BURST events (default 100000) is ingested at once, and
// the pipeline's sustained rate is the burst over the time from the first
// publish until both views equal the fold of the ledger (polled every
// second, so a long burst makes it exact). Once the cores have calmed down
// after the burst (settle), a paced producer publishes
// at half that rate (or at FOLDLINE_FRESHNESS_RATE events/s, to see the
// latency away from saturation) for FOLDLINE_FRESHNESS_SECONDS (default
// 60), and freshnessSamplesPerSecond of its events are followed: each from
// just before its send to the first read of its user's row whose last
// applied ledger position (fl_applied, which the sink keeps for
// exactly-once effect) has reached the event's. The marker is the sink's own
// bookkeeping, so the events are ordinary shop events and the views must
// still equal the independent fold afterwards, which the benchmark checks.
//
// To tell where the time goes, FOLDLINE_FRESHNESS_HOPS=1 adds readers on
// validate's and user-activity's output topics that note when each sample's
// outputs arrived there and the publish time their producers gave them
// (hopTrace; off by default, as reading every message of two topics is
// load of its own on 2 cores), and the run is shown
// in 5 s windows with how busy the machine's cores were and how many tasks
// were runnable: a stalled window on saturated shared cores is someone
// else's load as much as the pipeline's.
//
//	go test ./admin/e2e -run '^$' -bench Freshness -benchtime 1x -timeout 30m
func BenchmarkFreshness(b *testing.B) {
	burst := testenv.EnvInt(b, "FOLDLINE_FRESHNESS_BURST", 100_000)
	seconds := testenv.EnvInt(b, "FOLDLINE_FRESHNESS_SECONDS", 60)
	fixed := testenv.EnvInt(b, "FOLDLINE_FRESHNESS_RATE", 0)
	s := deployShop(b, "fresh")
	// Every stage started, subscribed and past its first batch.
	s.ingest(b, generate(b, 2000, 41))
	s.waitForFold(b, 5*time.Minute)
	table, err := s.activeTable("user_activity")
	if err != nil {
		b.Fatal(err)
	}

	for b.Loop() {
		loadBefore := loadAverage()
		sat := s.measureSaturation(b, burst, 42)
		ingested, caughtUp, saturation := sat.ingested, sat.caughtUp, sat.rate

		settled, calm := settle(b.Context())

		target := saturation / 2
		if fixed > 0 {
			target = float64(fixed)
		}
		paced := generate(b, int(target*float64(seconds)), 43)
		run := s.publishPaced(b, table, paced, target)
		s.waitForFold(b, 10*time.Minute)
		loadAfter := loadAverage()

		lat := run.latencies()
		if len(lat) == 0 {
			b.Fatal("no sample became visible: nothing was measured")
		}
		p50, p90, p99, most := quantile(lat, 0.50), quantile(lat, 0.90), quantile(lat, 0.99), lat[len(lat)-1]

		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "what\tvalue\t\n")
		fmt.Fprintf(tw, "saturation: %d events ingested in %s, views caught up after %s\t%.0f events/s\t\n",
			burst, ingested.Round(10*time.Millisecond), caughtUp.Round(10*time.Millisecond), saturation)
		calmNote := "cores calm"
		if !calm {
			calmNote = "gave up waiting: cores still busy"
		}
		fmt.Fprintf(tw, "after the burst, until the cores were under %.0f%% busy for %s (%s)\t%s\t\n",
			100*settleBusy, settleFor, calmNote, settled.Round(time.Second))
		fmt.Fprintf(tw, "paced: %d events over %s (%.2f of saturation)\t%.0f events/s\t\n",
			len(paced), run.took.Round(10*time.Millisecond), run.rate/saturation, run.rate)
		fmt.Fprintf(tw, "samples visible (of %d followed, every %s)\t%d\t\n", run.followed, freshnessPoll, len(lat))
		for _, q := range []struct {
			name string
			d    time.Duration
		}{{"published → row visible, p50", p50}, {"p90", p90}, {"p99 (aim " + freshnessAim + ")", p99}, {"max", most}} {
			fmt.Fprintf(tw, "%s\t%s\t\n", q.name, q.d.Round(time.Millisecond))
		}
		slices.Sort(run.windowed)
		var wp50, wp99 time.Duration
		if len(run.windowed) > 0 {
			wp50, wp99 = quantile(run.windowed, 0.50), quantile(run.windowed, 0.99)
			fmt.Fprintf(tw, "purchases visible in their tile of user_purchases_7d (windowed), of %d followed\t%d\t\n", len(run.windowed)+run.windowedLost, len(run.windowed))
			fmt.Fprintf(tw, "windowed: published → tile visible, p50\t%s\t\n", wp50.Round(time.Millisecond))
			fmt.Fprintf(tw, "windowed: p99 (aim %s)\t%s\t\n", freshnessAim, wp99.Round(time.Millisecond))
		}
		fmt.Fprintf(tw, "load average before / after (2 cores, shared)\t%s / %s\t\n", loadBefore, loadAfter)
		tw.Flush()
		fmt.Printf("paced run started at %s\n", run.start.UTC().Format("15:04:05.000"))
		run.printWindows(5 * time.Second)
		if ingested > caughtUp*9/10 {
			b.Logf("the views caught up within 10%% of the ingest's end: the burst measured the producer as much as the pipeline, and saturation may be higher")
		}
		if run.lost > 0 || run.windowedLost > 0 {
			b.Fatalf("%d of %d samples (and %d windowed ones) were not visible within %v", run.lost, run.followed, run.windowedLost, freshnessGiveUp)
		}

		ms := func(figure string, d time.Duration) benchreport.Figure {
			return benchreport.Figure{Bench: "freshness", Figure: figure, Value: float64(d) / float64(time.Millisecond), Unit: "ms"}
		}
		err := benchreport.Emit(
			benchreport.Figure{Bench: "freshness", Figure: fmt.Sprintf("saturation (burst of %d)", burst), Value: saturation, Unit: "events/s"},
			benchreport.Figure{Bench: "freshness", Figure: "settling after the burst", Value: settled.Seconds(), Unit: "s"},
			benchreport.Figure{Bench: "freshness", Figure: "paced rate", Value: run.rate, Unit: "events/s"}.Against("saturation", saturation),
			ms("published → visible p50", p50),
			ms("published → visible p90", p90),
			ms("published → visible p99", p99).Aiming(freshnessAim),
			ms("published → visible max", most),
		)
		if err == nil && len(run.windowed) > 0 {
			err = benchreport.Emit(
				ms("windowed view: published → tile visible p50", wp50),
				ms("windowed view: published → tile visible p99", wp99).Aiming(freshnessAim),
			)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
		b.ReportMetric(saturation, "saturation-events/s")
	}
}

// saturation is what measureSaturation measured.
type saturation struct {
	// ingested is how long the burst took to publish, caughtUp how long
	// until the views equalled the fold; rate is the burst's events over
	// caughtUp, in events per second.
	ingested, caughtUp time.Duration
	rate               float64
}

// measureSaturation measures the pipeline's sustained rate: a burst of n
// events generated from seed is ingested at once, and the rate is the
// burst over the time from the first publish until the views equal the
// fold of the ledger (polled every second, so a long burst makes it
// exact).
func (s *shop) measureSaturation(t testing.TB, n int, seed uint64) saturation {
	t.Helper()
	events := generate(t, n, seed)
	start := time.Now()
	s.ingest(t, events)
	ingested := time.Since(start)
	s.waitForFold(t, 30*time.Minute)
	caughtUp := time.Since(start)
	return saturation{ingested: ingested, caughtUp: caughtUp, rate: float64(n) / caughtUp.Seconds()}
}

// After the saturation burst the paced run waits until the machine's cores
// have been under settleBusy busy for settleFor (at most settleAtMost): the
// burst leaves work behind it (Cassandra flushing and compacting what it
// wrote, the broker trimming, collectors), and a paced run started on top of
// it measures that aftermath, not the pipeline at half of saturation: its
// first windows show a p50 of seconds where the later ones show tens of
// milliseconds.
const (
	settleBusy   = 0.5
	settleFor    = 5 * time.Second
	settleAtMost = 90 * time.Second
)

// settle waits until the cores have been at most settleBusy busy in each of
// settleFor's seconds in a row, or settleAtMost has passed; it returns how
// long it waited and whether the cores calmed down.
func settle(ctx context.Context) (time.Duration, bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleAtMost)
	defer cancel()
	calmSeconds, calm := 0, false
	everySecond(ctx, func(busy float64, _ int) bool {
		if busy > settleBusy {
			calmSeconds = 0
			return true
		}
		calmSeconds++
		calm = calmSeconds >= int(settleFor/time.Second)
		return !calm
	})
	return time.Since(start), calm
}

// pacedRun is what publishPaced measured.
type pacedRun struct {
	rate     float64           // events per second actually published
	took     time.Duration     // from the first send to the last
	followed int               // samples followed
	lost     int               // samples whose row never showed them
	samples  []freshnessSample // of the samples seen, in no order
	// windowed holds the purchases followed to their tile of the windowed
	// view user_purchases_7d (published → visible), windowedLost those
	// never seen there.
	windowed     []time.Duration
	windowedLost int
	cpu          *cpuSampler // the machine's CPU over the run
	start        time.Time   // when the first event was sent
}

// freshnessSample is one event followed to its row.
type freshnessSample struct {
	sent    time.Duration // since the paced run's start
	visible time.Duration // published → visible
	// For the hop trace: the event's ledger position, when it was sent and
	// when the broker confirmed it.
	pos               envelope.Position
	sentAt, confirmed time.Time
}

// latencies returns the samples' published → visible times, sorted.
func (r pacedRun) latencies() []time.Duration {
	lat := make([]time.Duration, len(r.samples))
	for i, s := range r.samples {
		lat[i] = s.visible
	}
	slices.Sort(lat)
	return lat
}

// printWindows prints the samples' p50 and max per window of the run, by
// when they were sent: whether a high quantile comes from a stall or from
// the whole run.
func (r pacedRun) printWindows(window time.Duration) {
	r.cpu.cancel()
	byWindow := map[int]pacedRun{}
	for _, s := range r.samples {
		w := byWindow[int(s.sent/window)]
		w.samples = append(w.samples, s)
		byWindow[int(s.sent/window)] = w
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "sent at\tsamples\tp50\tmax\tcores busy\tmost runnable\t\n")
	for _, i := range slices.Sorted(maps.Keys(byWindow)) {
		lat := byWindow[i].latencies()
		from, to := time.Duration(i)*window, time.Duration(i+1)*window
		busy, runnable := r.cpu.window(from, to)
		fmt.Fprintf(tw, "%s–%s\t%d\t%s\t%s\t%.0f%%\t%d\t\n", from, to, len(lat),
			quantile(lat, 0.5).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), 100*busy, runnable)
	}
	tw.Flush()
}

// publishPaced publishes lines to the ledger at rate events per second, as
// an application would (the user as the key), and follows a sample of them
// to their user_activity row in table. It returns once every sample is
// visible or given up.
func (s *shop) publishPaced(b *testing.B, table string, lines [][]byte, rate float64) pacedRun {
	b.Helper()
	client, err := pulsar.NewClient(s.svc.PulsarClientOptions())
	if err != nil {
		b.Fatalf("connecting to Pulsar: %v", err)
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: ingest.DefaultTopic(s.tenant)})
	if err != nil {
		b.Fatalf("creating a producer: %v", err)
	}
	defer producer.Close()

	// The hop trace reads every message of two topics, which on 2 cores
	// is load the pipeline competes with: only on request.
	var hops *hopTrace
	if os.Getenv("FOLDLINE_FRESHNESS_HOPS") != "" {
		hops = s.traceHops(b, client, "persistent://"+s.tenant+"/pipeline/valid", "persistent://"+s.tenant+"/pipeline/user-activity-ops")
		defer hops.stop()
	}

	rejected := map[int]bool{}
	for _, i := range foldAtCassandraPrecision(lines).Rejected {
		rejected[i] = true
	}
	every := max(1, int(rate/freshnessSamplesPerSecond))
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var (
		run     pacedRun
		mu      sync.Mutex
		waiting sync.WaitGroup
		failed  error
	)
	watch := s.watchApplied(ctx, table, false)
	// Purchases also go to the windowed view user_purchases_7d: a sample of
	// those whose tile is live is followed to it (a purchase is about a
	// sixth of the events, so six times as often).
	var windowWatch *appliedWatch
	var windowedEvery int
	var expiresBefore time.Time
	if s.windowed {
		wt, err := s.activeTable("user_purchases_7d")
		if err != nil {
			b.Fatal(err)
		}
		windowWatch = s.watchApplied(ctx, wt, true)
		windowedEvery = max(1, every/6)
		expiresBefore = time.Now().Add(-7*24*time.Hour + time.Hour) // a live tile, with an hour to spare
	}
	followWindow := func(user string, tile, sent time.Time, id pulsar.MessageID) {
		pos := envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}
		d, err := windowWatch.await(ctx, user, tile, pos, sent)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			run.windowedLost++
			b.Logf("windowed sample of %s at %s: %v", user, pos, err)
			return
		}
		run.windowed = append(run.windowed, d)
	}
	start := time.Now()
	run.cpu = sampleCPU(ctx, start)
	run.start = start
	follow := func(user string, sent, confirmed time.Time, id pulsar.MessageID) {
		pos := envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}
		d, err := watch.await(ctx, user, time.Time{}, pos, sent)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			run.lost++
			b.Logf("sample of %s at %s: %v", user, pos, err)
			return
		}
		run.samples = append(run.samples, freshnessSample{sent: sent.Sub(start), visible: d, pos: pos, sentAt: sent, confirmed: confirmed})
	}

	for i, line := range lines {
		if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		var ev struct{ User, Time, Type string }
		_ = json.Unmarshal(line, &ev) // malformed lines go as they are, and are not sampled
		msg := &pulsar.ProducerMessage{Payload: line, Key: ev.User}
		if at, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
			msg.EventTime = at
		}
		sample := i%every == 0 && !rejected[i]
		if sample {
			run.followed++
			waiting.Add(1)
		}
		tile := msg.EventTime.UTC().Truncate(time.Hour)
		windowSample := windowWatch != nil && ev.Type == "purchase" && i%windowedEvery == 0 && !rejected[i] && tile.After(expiresBefore)
		if windowSample {
			waiting.Add(1)
		}
		sent := time.Now()
		producer.SendAsync(ctx, msg, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			confirmed := time.Now()
			if err != nil {
				mu.Lock()
				failed = fmt.Errorf("publishing line %d: %w", i, err)
				mu.Unlock()
			}
			if windowSample {
				if err != nil {
					waiting.Done()
				} else {
					go func() {
						defer waiting.Done()
						followWindow(ev.User, tile, sent, id)
					}()
				}
			}
			if !sample {
				return
			}
			if err != nil {
				waiting.Done()
				return
			}
			go func() {
				defer waiting.Done()
				follow(ev.User, sent, confirmed, id)
			}()
		})
	}
	run.took = time.Since(start)
	run.rate = float64(len(lines)) / run.took.Seconds()
	if err := producer.Flush(); err != nil {
		b.Fatalf("flushing the producer: %v", err)
	}
	waiting.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	s.ledger = append(s.ledger, lines...)
	if hops != nil {
		hops.print(run.samples)
	}
	return run
}

// appliedWatch reads the rows of every sample still waiting with one
// query every freshnessPoll, and answers each sample once its user's row's
// last applied ledger position has reached the sample's event. One reader
// for all keeps the bench's own load on Cassandra at freshnessPoll's rate
// however many samples wait: a reader per sample made a slow stretch worse,
// forty samples waiting two seconds each reading every 10 ms.
type appliedWatch struct {
	s     *shop
	table string
	// windowed: the table is a windowed view's, whose rows are tiles; a
	// waiter waits for its event's tile.
	windowed bool
	mu       sync.Mutex
	wait     map[string][]*appliedWaiter // by user
	woken    chan struct{}
}

// appliedWaiter is one sample waiting for its row.
type appliedWaiter struct {
	pos  envelope.Position
	sent time.Time
	// tile is the event's tile in a windowed view.
	tile time.Time
	done chan appliedResult
}

type appliedResult struct {
	d   time.Duration
	err error
}

// watchApplied starts an appliedWatch of table (a windowed view's when
// windowed); it stops with ctx.
func (s *shop) watchApplied(ctx context.Context, table string, windowed bool) *appliedWatch {
	w := &appliedWatch{s: s, table: table, windowed: windowed, wait: map[string][]*appliedWaiter{}, woken: make(chan struct{}, 1)}
	go w.run(ctx)
	return w
}

// await waits until user's row (in a windowed view, the row of tile) has
// applied pos, and returns the time since sent.
func (w *appliedWatch) await(ctx context.Context, user string, tile time.Time, pos envelope.Position, sent time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, freshnessGiveUp)
	defer cancel()
	waiter := &appliedWaiter{pos: pos, sent: sent, tile: tile, done: make(chan appliedResult, 1)}
	w.mu.Lock()
	w.wait[user] = append(w.wait[user], waiter)
	w.mu.Unlock()
	select {
	case w.woken <- struct{}{}:
	default:
	}
	select {
	case r := <-waiter.done:
		return r.d, r.err
	case <-ctx.Done():
		w.mu.Lock()
		w.wait[user] = slices.DeleteFunc(w.wait[user], func(x *appliedWaiter) bool { return x == waiter })
		w.mu.Unlock()
		return 0, fmt.Errorf("waiting for the row to apply the event: %w", ctx.Err())
	}
}

// run reads the waiting users' rows every freshnessPoll while any wait.
func (w *appliedWatch) run(ctx context.Context) {
	tile := "toTimestamp(now())" // a constant for a table without tiles
	if w.windowed {
		tile = "fl_tile"
	}
	stmt := `SELECT "user", ` + tile + `, fl_applied FROM ` + w.s.keyspace + `.` + w.table + ` WHERE "user" IN ?`
	for {
		w.mu.Lock()
		users := slices.Collect(maps.Keys(w.wait))
		w.mu.Unlock()
		if len(users) == 0 {
			select {
			case <-w.woken:
				continue
			case <-ctx.Done():
				return
			}
		}
		next := time.Now().Add(freshnessPoll)
		iter := w.s.session.Query(stmt, users).WithContext(ctx).Iter()
		seen := time.Now()
		var (
			user    string
			tile    time.Time
			applied map[string]string
		)
		// A user's row before its first event does not exist: not
		// visible yet, like an older position.
		for iter.Scan(&user, &tile, &applied) {
			w.answer(user, tile, applied, seen)
			applied = nil
		}
		_ = iter.Close() // a failed read is tried again at the next poll
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
	}
}

// answer wakes the waiters of user whose event the row (of tile, in a
// windowed view) has applied.
func (w *appliedWatch) answer(user string, tile time.Time, applied map[string]string, seen time.Time) {
	var at []envelope.Position
	var bad error
	for _, p := range applied {
		pos, err := envelope.ParsePosition(p)
		if err != nil {
			bad = fmt.Errorf("reading fl_applied of %s: %w", user, err)
			continue
		}
		at = append(at, pos.Event())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wait[user] = slices.DeleteFunc(w.wait[user], func(x *appliedWaiter) bool {
		if bad != nil {
			x.done <- appliedResult{err: bad}
			return true
		}
		if w.windowed && !x.tile.Equal(tile) {
			return false
		}
		for _, a := range at {
			if a.Compare(x.pos) >= 0 {
				x.done <- appliedResult{d: seen.Sub(x.sent)}
				return true
			}
		}
		return false
	})
	if len(w.wait[user]) == 0 {
		delete(w.wait, user)
	}
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// loadAverage is the machine's 1-minute load average, as /proc/loadavg
// has it: how busy the shared cores were.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(raw))[0]
}
