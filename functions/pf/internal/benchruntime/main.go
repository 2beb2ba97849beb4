// Command benchruntime measures the Foldline runtime against its limit and
// its peer, in one run on the local stack (scripts/bench-runtime runs it):
// messages per second and peak resident memory of
//
//   - a plain pulsar-client-go consume→produce loop (the limit), run as a
//     child process of this command;
//   - the identity example function (functions/examples/identity) deployed
//     under the functions worker with pulsar-admin functions create --go;
//   - the stock Java ExclamationFunction from the distribution's
//     examples/api-examples.jar, deployed under the same worker.
//
// Each contender gets its own input topic, prefilled with n keyed messages
// carrying properties, and subscribes at Earliest; the rate is taken over
// the outputs after the first fifth (warm-up), as seen by a reader. It is a
// benchmark, not a test: it asserts nothing.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/services"
)

type options struct {
	n          int
	size       int
	serviceURL string
	adminURL   string
	// svc carries the credentials (FOLDLINE_PULSAR_TOKEN…, see package
	// services) and the two URLs above.
	svc        services.Services
	pulsarHome string
	repoRoot   string
	// failover subscribes every contender with a failover subscription
	// (--retain-ordering for the functions), Foldline's mode; otherwise
	// shared, the worker's default.
	failover bool
	// derived prefills the inputs with an origin position in their
	// properties, as every stage after the first in a DAG reads them: the
	// runtime passes the origin through instead of adding it.
	derived bool
	rounds  int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "loop" {
		if err := plainLoop(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "loop:", err)
			os.Exit(1)
		}
		return
	}
	home, _ := os.UserHomeDir()
	var o options
	flag.IntVar(&o.n, "n", 200_000, "messages per contender")
	flag.IntVar(&o.size, "size", 100, "payload bytes")
	flag.StringVar(&o.serviceURL, "pulsar-url", envOr("FOLDLINE_PULSAR_URL", "pulsar://127.0.0.1:6650"), "broker URL")
	flag.StringVar(&o.adminURL, "admin-url", envOr("FOLDLINE_PULSAR_ADMIN_URL", "http://127.0.0.1:8080"), "admin URL")
	flag.StringVar(&o.pulsarHome, "pulsar-home", envOr("FOLDLINE_PULSAR_HOME", filepath.Join(home, ".cache", "foldline", "apache-pulsar-4.0.8")), "Pulsar distribution")
	flag.StringVar(&o.repoRoot, "repo", ".", "checkout root")
	flag.BoolVar(&o.failover, "failover", true, "failover subscriptions (--retain-ordering); false: shared")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of all contenders; the table shows each one's median")
	flag.BoolVar(&o.derived, "derived", false, "inputs carry an origin position already (a stage after the first); false: ledger events, to which the runtime adds it")
	flag.Parse()
	svc, err := services.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-runtime:", err)
		os.Exit(2)
	}
	o.svc = svc
	o.svc.PulsarURL, o.svc.PulsarAdminURL = o.serviceURL, o.adminURL
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-runtime:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func quietLogger() pulsarlog.Logger {
	return pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// contender is one thing measured: start deploys or starts it and returns
// how to find its process and how to stop it.
type contender struct {
	name string
	// schema of the input and output topics; nil means bytes. The Java
	// function uses STRING, and the broker refuses to add a schema to a
	// topic that already has a schemaless client on it.
	schema func() pulsar.Schema
	start  func(ctx context.Context, in, out string) (pid func() int, stop func(), err error)
}

type result struct {
	name  string
	rate  float64
	rssMB float64
	err   error
	// cpuPerMsg is the contender's own CPU time per message.
	cpuPerMsg time.Duration
	// rounds holds the rate of every round (in the table: the median's).
	rounds []float64
}

func bench(ctx context.Context, o options) error {
	client, err := newClient(o.svc)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	defer client.Close()

	tmp, err := os.MkdirTemp("", "bench-runtime")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	identity := filepath.Join(tmp, "identity")
	build := exec.CommandContext(ctx, "go", "build", "-o", identity, "./functions/examples/identity")
	build.Dir, build.Stdout, build.Stderr = o.repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the identity example: %w", err)
	}

	contenders := func(ns string) []contender {
		return []contender{
			{name: "plain pulsar-client-go loop (limit)", start: func(ctx context.Context, in, out string) (func() int, func(), error) {
				subType := "shared"
				if o.failover {
					subType = "failover"
				}
				cmd := exec.CommandContext(ctx, self, "loop", o.serviceURL, in, out, subType)
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					return nil, nil, err
				}
				return func() int { return cmd.Process.Pid }, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }, nil
			}},
			{name: "Foldline identity under the worker", start: func(ctx context.Context, in, out string) (func() int, func(), error) {
				return deploy(ctx, o, ns, "identity", in, out, []string{"--go", identity}, "/pulsar_functions/"+ns+"/identity/")
			}},
			{name: "Java ExclamationFunction under the worker (peer)", schema: func() pulsar.Schema { return pulsar.NewStringSchema(nil) }, start: func(ctx context.Context, in, out string) (func() int, func(), error) {
				return deploy(ctx, o, ns, "exclamation", in, out, []string{
					"--jar", filepath.Join(o.pulsarHome, "examples", "api-examples.jar"),
					"--classname", "org.apache.pulsar.functions.api.examples.ExclamationFunction",
				}, `"namespace":"`+strings.Split(ns, "/")[1]+`"`)
			}},
		}
	}
	// Each round measures every contender once, one after the other, in a
	// namespace of its own; the table shows each contender's median round,
	// so that a burst of load on the shared machine moves one round, not
	// the ratios.
	var rounds [][]result
	id := rand.IntN(1_000_000)
	for round := range o.rounds {
		ns := fmt.Sprintf("public/pfbench-%d-r%d", id, round)
		if err := adminDo(o, "PUT", "/admin/v2/namespaces/"+ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		var results []result
		for i, c := range contenders(ns) {
			in, out := fmt.Sprintf("persistent://%s/in-%d", ns, i), fmt.Sprintf("persistent://%s/out-%d", ns, i)
			fmt.Fprintf(os.Stderr, "==> round %d/%d, %s: prefilling %d messages\n", round+1, o.rounds, c.name, o.n)
			if err := prefill(ctx, client, c, in, o); err != nil {
				cleanUp(o, ns)
				return err
			}
			r := measure(ctx, client, c, in, out, o.n)
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "    %s: %v\n", c.name, r.err)
			} else {
				fmt.Fprintf(os.Stderr, "    %.0f msg/s, peak RSS %.0f MB\n", r.rate, r.rssMB)
			}
			results = append(results, r)
		}
		cleanUp(o, ns)
		rounds = append(rounds, results)
	}
	printTable(medians(rounds), o)
	return nil
}

// medians returns, per contender, the result of its median round by rate
// (with the peak memory over all rounds), and the failure of any round.
func medians(rounds [][]result) []result {
	out := make([]result, len(rounds[0]))
	for c := range out {
		var ok []result
		peak := 0.0
		for _, round := range rounds {
			r := round[c]
			if r.err != nil {
				out[c] = r
				break
			}
			ok = append(ok, r)
			peak = max(peak, r.rssMB)
		}
		if out[c].err != nil {
			continue
		}
		sort.Slice(ok, func(i, j int) bool { return ok[i].rate < ok[j].rate })
		out[c] = ok[len(ok)/2]
		out[c].rssMB = peak
		for _, r := range rounds {
			out[c].rounds = append(out[c].rounds, r[c].rate)
		}
	}
	return out
}

func printTable(results []result, o options) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "contender\tmsg/s (median)\tCPU µs/msg\tpeak RSS MB\tvs limit\tvs peer\trounds msg/s\n")
	limit, peer := results[0].rate, results[len(results)-1].rate
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(w, "%s\tfailed: %v\t\t\t\t\t\n", r.name, r.err)
			continue
		}
		each := make([]string, len(r.rounds))
		for i, rate := range r.rounds {
			each[i] = fmt.Sprintf("%.0f", rate)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.1f\t%.0f\t%s\t%s\t%s\n", r.name, r.rate, float64(r.cpuPerMsg)/float64(time.Microsecond), r.rssMB, ratio(r.rate, limit), ratio(r.rate, peer), strings.Join(each, " "))
	}
	subType := "shared"
	if o.failover {
		subType = "failover"
	}
	inputs := "ledger events (the runtime adds their origin)"
	if o.derived {
		inputs = "derived events (their origin passes through)"
	}
	fmt.Fprintf(w, "(%d messages of %d bytes each, keyed, with properties; %s; %s subscriptions; rate over the last 80%%)\n", o.n, o.size, inputs, subType)
	w.Flush()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func (c contender) schemaOrNil() pulsar.Schema {
	if c.schema == nil {
		return nil
	}
	return c.schema()
}

func prefill(ctx context.Context, client pulsar.Client, c contender, topic string, o options) error {
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 10 * time.Millisecond, Schema: c.schemaOrNil()})
	if err != nil {
		return fmt.Errorf("creating producer for %s: %w", topic, err)
	}
	defer p.Close()
	payload := []byte(strings.Repeat("x", o.size))
	var failed atomic.Pointer[error]
	for i := range o.n {
		props := map[string]string{"type": "bench"}
		if o.derived {
			props[envelope.PropOriginTopic] = "persistent://bench/ledger/events-partition-0"
			props[envelope.PropOriginPosition] = envelope.Position{Ledger: 1234, Entry: int64(i / 100), Batch: int32(i % 100)}.String()
		}
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload: payload, Key: "entity-" + strconv.Itoa(i%1000),
			Properties: props,
		}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				failed.Store(&err)
			}
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		return fmt.Errorf("prefilling %s: %w", topic, err)
	}
	if e := failed.Load(); e != nil {
		return fmt.Errorf("prefilling %s: %w", topic, *e)
	}
	return nil
}

// measure starts c, reads its n outputs and samples its resident memory.
func measure(ctx context.Context, client pulsar.Client, c contender, in, out string, n int) result {
	r := result{name: c.name}
	reader, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: out, SubscriptionName: "bench-reader", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize: 5000, Schema: c.schemaOrNil(),
	})
	if err != nil {
		r.err = fmt.Errorf("subscribing to %s: %w", out, err)
		return r
	}
	defer reader.Close()
	pid, stop, err := c.start(ctx, in, out)
	if err != nil {
		r.err = err
		return r
	}
	defer stop()

	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var peakRSS atomic.Int64
	go sampleRSS(ctx, pid, &peakRSS)

	warm := n / 5
	var start time.Time
	var cpuAtStart time.Duration
	for i := 0; i < n; i++ {
		if _, err := reader.Receive(ctx); err != nil {
			r.err = fmt.Errorf("after %d of %d outputs: %w", i, n, err)
			return r
		}
		if i == warm {
			start, cpuAtStart = time.Now(), proc.CPUTime(pid())
		}
	}
	r.rate = float64(n-1-warm) / time.Since(start).Seconds()
	r.cpuPerMsg = (proc.CPUTime(pid()) - cpuAtStart) / time.Duration(n-1-warm)
	r.rssMB = float64(peakRSS.Load()) / 1024
	return r
}

// sampleRSS keeps the peak VmRSS (kB) of the process pid() reports.
func sampleRSS(ctx context.Context, pid func() int, peak *atomic.Int64) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if kb := proc.RSSKB(pid()); kb > peak.Load() {
			peak.Store(kb)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deploy creates a function with the distribution's pulsar-admin and finds
// its instance process by a marker in its command line.
func deploy(ctx context.Context, o options, ns, name, in, out string, kind []string, marker string) (func() int, func(), error) {
	tenant, namespace, _ := strings.Cut(ns, "/")
	args := append([]string{"functions", "create", "--tenant", tenant, "--namespace", namespace, "--name", name,
		"--inputs", in, "--output", out, "--subs-position", "Earliest"}, kind...)
	if o.failover {
		args = append(args, "--retain-ordering")
	}
	// The runtime runs as the function's token, never the worker's.
	token, err := o.svc.PulsarTokenValue()
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		secrets, _ := json.Marshal(map[string]string{"token": token})
		args = append(args, "--secrets", string(secrets))
	}
	if err := pulsarAdmin(ctx, o, args...); err != nil {
		return nil, nil, err
	}
	var pid atomic.Int64
	go func() {
		for ctx.Err() == nil && pid.Load() == 0 {
			if pids := proc.PIDs(func(argv []string) bool { return strings.Contains(strings.Join(argv, " "), marker) }); len(pids) > 0 {
				pid.Store(int64(pids[0]))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	stop := func() {
		_ = adminDo(o, "DELETE", "/admin/v3/functions/"+ns+"/"+name)
	}
	return func() int { return int(pid.Load()) }, stop, nil
}

func pulsarAdmin(ctx context.Context, o options, args ...string) error {
	global := []string{"--admin-url", o.adminURL}
	token, err := o.svc.PulsarTokenValue()
	if err != nil {
		return err
	}
	if token != "" {
		global = append(global, "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "token:"+token)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(o.pulsarHome, "bin", "pulsar-admin"), append(global, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pulsar-admin %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func adminDo(o options, method, path string) error {
	req, err := http.NewRequest(method, o.adminURL+path, nil)
	if err != nil {
		return err
	}
	if err := o.svc.AuthorizePulsar(req); err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	return nil
}

// cleanUp deletes the namespace's functions' topics and the namespace.
func cleanUp(o options, ns string) {
	time.Sleep(5 * time.Second) // let the worker stop the instances it was told to delete
	req, _ := http.NewRequest("GET", o.adminURL+"/admin/v2/namespaces/"+ns+"/topics", nil)
	if err := o.svc.AuthorizePulsar(req); err != nil {
		fmt.Fprintln(os.Stderr, "cleaning up:", err)
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		resp.Body.Close()
		for _, t := range strings.Split(strings.Trim(b.String(), "[]"), ",") {
			t = strings.Trim(t, `"`)
			if t != "" {
				_ = adminDo(o, "DELETE", "/admin/v2/"+strings.Replace(t, "://", "/", 1)+"?force=true")
			}
		}
	}
	if err := adminDo(o, "DELETE", "/admin/v2/namespaces/"+ns); err != nil {
		fmt.Fprintln(os.Stderr, "cleaning up:", err)
	}
}

// plainLoop is the limit: consume, produce with the same key and
// properties, acknowledge once the send is confirmed.
// newClient is a quiet client of svc's broker with its credentials.
func newClient(svc services.Services) (pulsar.Client, error) {
	opts := svc.PulsarClientOptions()
	opts.Logger = quietLogger()
	return pulsar.NewClient(opts)
}

func plainLoop(args []string) error {
	if len(args) != 4 {
		return errors.New("usage: loop <service-url> <in> <out> failover|shared")
	}
	subType := pulsar.Shared
	if args[3] == "failover" {
		subType = pulsar.Failover
	}
	svc, err := services.Load()
	if err != nil {
		return err
	}
	svc.PulsarURL = args[0]
	client, err := newClient(svc)
	if err != nil {
		return err
	}
	defer client.Close()
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: args[1], SubscriptionName: "bench-loop", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		Type: subType,
	})
	if err != nil {
		return err
	}
	defer consumer.Close()
	// LZ4 and a 10 ms batching delay, like the producers of both functions
	// under the worker, so that the limit does the same work.
	producer, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic: args[2], BatchingMaxPublishDelay: 10 * time.Millisecond, CompressionType: pulsar.LZ4,
	})
	if err != nil {
		return err
	}
	defer producer.Close()
	for cm := range consumer.Chan() {
		msg := cm.Message
		producer.SendAsync(context.Background(), &pulsar.ProducerMessage{
			Payload: msg.Payload(), Key: msg.Key(), Properties: msg.Properties(), EventTime: msg.EventTime(),
		}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err == nil {
				_ = consumer.Ack(msg)
			}
		})
	}
	return nil
}
