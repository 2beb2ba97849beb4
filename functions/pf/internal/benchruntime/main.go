// Command benchruntime measures the Foldline runtime against its limit and
// its peer, in one run on the local stack (scripts/bench-runtime runs it):
// messages per second, CPU time per message and peak resident memory of
//
//   - a plain pulsar-client-go consume→produce loop tuned for throughput
//     (receiver queue 5000, 10 000 pending messages, no compression): the
//     limit, run as a child process of this command, with the broker's
//     timer slack, which the functions the worker starts inherit. Like
//     every Foldline stage it carries its input's origin on each output:
//     a ledger event's gains one property of the origin's size;
//   - the same loop with the client's defaults and LZ4, the settings the
//     runtime had before they became user config;
//   - the identity example function (functions/examples/identity) deployed
//     under the functions worker with pulsar-admin functions create --go,
//     with the runtime's default client settings (or -identity-config);
//   - the stock Java ExclamationFunction from the distribution's
//     examples/api-examples.jar, deployed under the same worker: the peer.
//
// Each contender gets its own input topic, prefilled with n keyed messages
// carrying properties, and subscribes at Earliest; the rate is taken over
// the outputs after the first fifth (warm-up), as seen by a reader; msg/entry
// is the mean batch the contender's producer wrote to its output topic. It is a
// benchmark, not a test: it asserts nothing. With -json FILE it appends one
// JSON object per figure to FILE (JSON Lines).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/targetversion"
)

type options struct {
	n    int
	size int
	// payload is "json" (benchEvent) or "x" (the letter repeated).
	payload    string
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
	// identityConfig is the identity function's user config (JSON): the
	// runtime's client settings, e.g. its old ones.
	identityConfig string
	// identityUC is identityConfig parsed (nil when empty).
	identityUC map[string]any
	// only names the contenders to run (by key), all when empty.
	only map[string]bool
	// jsonPath is the JSON Lines file the figures are appended to.
	jsonPath string
	// profileDir, when set, gets a pprof CPU profile of the plain loops'
	// and the identity function's processes per round
	// (<key>-r<round>.pprof).
	profileDir string
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
	flag.IntVar(&o.size, "size", 100, "payload bytes (at least: a -payload json event is never cut)")
	flag.StringVar(&o.payload, "payload", "json", `payloads: "json", shop-like JSON events that differ from each other as a ledger's do; "x", the letter x repeated (compresses to nothing)`)
	flag.StringVar(&o.serviceURL, "pulsar-url", envOr("FOLDLINE_PULSAR_URL", "pulsar://127.0.0.1:6650"), "broker URL")
	flag.StringVar(&o.adminURL, "admin-url", envOr("FOLDLINE_PULSAR_ADMIN_URL", "http://127.0.0.1:8080"), "admin URL")
	flag.StringVar(&o.pulsarHome, "pulsar-home", envOr("FOLDLINE_PULSAR_HOME", filepath.Join(home, ".cache", "foldline", "apache-pulsar-"+targetversion.Pulsar)), "Pulsar distribution")
	flag.StringVar(&o.repoRoot, "repo", ".", "checkout root")
	flag.BoolVar(&o.failover, "failover", true, "failover subscriptions (--retain-ordering); false: shared")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of all contenders; the table shows each one's median")
	flag.BoolVar(&o.derived, "derived", false, "inputs carry an origin position already (a stage after the first); false: ledger events, to which the runtime adds it")
	flag.StringVar(&o.identityConfig, "identity-config", "", `user config of the identity function (JSON), e.g. '{"receiverQueueSize":1000,"compression":"lz4"}'; empty: the runtime's defaults`)
	only := flag.String("contenders", "", "comma-separated contenders to run, of "+strings.Join(contenderKeys, ",")+"; empty: all")
	flag.StringVar(&o.jsonPath, "json", "", "append the figures to this file as JSON Lines")
	flag.StringVar(&o.profileDir, "cpuprofile", "", "write CPU profiles of the plain loops and the identity function to this directory (<contender>-r<round>.pprof)")
	flag.Parse()
	if o.payload != "json" && o.payload != "x" {
		fmt.Fprintf(os.Stderr, "bench-runtime: -payload %q: want json or x\n", o.payload)
		os.Exit(2)
	}
	if o.identityConfig != "" {
		if err := json.Unmarshal([]byte(o.identityConfig), &o.identityUC); err != nil {
			fmt.Fprintf(os.Stderr, "bench-runtime: -identity-config: %v\n", err)
			os.Exit(2)
		}
	}
	if *only != "" {
		o.only = map[string]bool{}
		for _, k := range strings.Split(*only, ",") {
			if !slices.Contains(contenderKeys, k) {
				fmt.Fprintf(os.Stderr, "bench-runtime: -contenders: unknown %q, want some of %s\n", k, strings.Join(contenderKeys, ","))
				os.Exit(2)
			}
			o.only[k] = true
		}
	}
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

// contenderKeys name the contenders for -contenders, in table order.
var contenderKeys = []string{"tuned", "tuned-lz4", "default", "identity", "java"}

// contender is one thing measured: start deploys or starts it and returns
// how to find its process and how to stop it.
type contender struct {
	key  string
	name string
	// schema of the input and output topics; nil means bytes. The Java
	// function uses STRING, and the broker refuses to add a schema to a
	// topic that already has a schemaless client on it.
	schema func() pulsar.Schema
	start  func(ctx context.Context, in, out string) (pid func() int, stop func(), err error)
}

type result struct {
	key   string
	name  string
	rate  float64
	rssMB float64
	err   error
	// cpuPerMsg is the contender's own CPU time per message; brokerPerMsg
	// the broker's (the standalone, worker included) over the same window.
	cpuPerMsg, brokerPerMsg time.Duration
	// perEntry is the mean number of messages in one entry of the output
	// topic: the contender's producer batches.
	perEntry float64
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

	// profile is where contender key writes its CPU profile in round, ""
	// for none.
	profile := func(key string, round int) string {
		if o.profileDir == "" {
			return ""
		}
		return filepath.Join(o.profileDir, fmt.Sprintf("%s-r%d.pprof", key, round+1))
	}
	loop := func(settings, profilePath string) func(ctx context.Context, in, out string) (func() int, func(), error) {
		return func(ctx context.Context, in, out string) (func() int, func(), error) {
			subType := "shared"
			if o.failover {
				subType = "failover"
			}
			cmd := exec.CommandContext(ctx, self, "loop", o.serviceURL, in, out, subType, settings, profilePath)
			cmd.Stderr = os.Stderr
			if err := startWithBrokerSlack(cmd); err != nil {
				return nil, nil, err
			}
			// SIGTERM lets it write its profile; closing gets 5 s.
			stop := func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				kill := time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
				_ = cmd.Wait()
				kill.Stop()
			}
			return func() int { return cmd.Process.Pid }, stop, nil
		}
	}
	identityArgs := func(round int) ([]string, error) {
		args := []string{"--go", identity}
		userConfig := o.identityConfig
		if path := profile("identity", round); path != "" {
			conf := maps.Clone(o.identityUC)
			if conf == nil {
				conf = map[string]any{}
			}
			conf["cpuProfile"] = path
			b, _ := json.Marshal(conf)
			userConfig = string(b)
		}
		if userConfig != "" {
			args = append(args, "--user-config", userConfig)
		}
		return args, nil
	}
	contenders := func(ns string, round int) []contender {
		all := []contender{
			{key: "tuned", name: "plain loop, tuned (limit)", start: loop("tuned", profile("tuned", round))},
			{key: "tuned-lz4", name: "plain loop, tuned + LZ4 (limit)", start: loop("tuned-lz4", profile("tuned-lz4", round))},
			{key: "default", name: "plain loop, client defaults + LZ4", start: loop("default", profile("default", round))},
			{key: "identity", name: "Foldline identity under the worker", start: func(ctx context.Context, in, out string) (func() int, func(), error) {
				args, err := identityArgs(round)
				if err != nil {
					return nil, nil, err
				}
				return deploy(ctx, o, ns, "identity", in, out, args, "/pulsar_functions/"+ns+"/identity/")
			}},
			{key: "java", name: "Java ExclamationFunction under the worker (peer)", schema: func() pulsar.Schema { return pulsar.NewStringSchema(nil) }, start: func(ctx context.Context, in, out string) (func() int, func(), error) {
				return deploy(ctx, o, ns, "exclamation", in, out, []string{
					"--jar", filepath.Join(o.pulsarHome, "examples", "api-examples.jar"),
					"--classname", "org.apache.pulsar.functions.api.examples.ExclamationFunction",
				}, `"namespace":"`+strings.Split(ns, "/")[1]+`"`)
			}},
		}
		return slices.DeleteFunc(all, func(c contender) bool { return o.only != nil && !o.only[c.key] })
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
		// Each round starts with the next contender: the first one after a
		// namespace is created runs slower here, whoever it is.
		cs := contenders(ns, round)
		results := make([]result, len(cs))
		for k := range cs {
			i := (round + k) % len(cs)
			c := cs[i]
			in, out := fmt.Sprintf("persistent://%s/in-%d", ns, i), fmt.Sprintf("persistent://%s/out-%d", ns, i)
			fmt.Fprintf(os.Stderr, "==> round %d/%d, %s: prefilling %d messages\n", round+1, o.rounds, c.name, o.n)
			if err := prefill(ctx, client, c, in, o); err != nil {
				cleanUp(o, ns)
				return err
			}
			r := measure(ctx, o, client, c, in, out, o.n)
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "    %s: %v\n", c.name, r.err)
			} else {
				fmt.Fprintf(os.Stderr, "    %.0f msg/s, %.1f µs/msg (broker %.1f), %.0f messages per output entry, peak RSS %.0f MB\n",
					r.rate, micros(r.cpuPerMsg), micros(r.brokerPerMsg), r.perEntry, r.rssMB)
			}
			results[i] = r
		}
		cleanUp(o, ns)
		rounds = append(rounds, results)
	}
	results := medians(rounds)
	printTable(results, o)
	if o.jsonPath != "" {
		if err := appendJSON(o.jsonPath, figures(results, o.derived)); err != nil {
			return fmt.Errorf("writing %s: %w", o.jsonPath, err)
		}
	}
	return nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// medians returns, per contender, the median over its rounds of each figure
// (rate, CPU per message, the broker's, peak memory) and the failure of any
// round; rounds keeps every round's rate.
func medians(rounds [][]result) []result {
	out := make([]result, len(rounds[0]))
	for c := range out {
		var ok []result
		for _, round := range rounds {
			if round[c].err != nil {
				ok = nil
				out[c] = round[c]
				break
			}
			ok = append(ok, round[c])
		}
		if ok == nil {
			continue
		}
		out[c] = result{
			key: ok[0].key, name: ok[0].name,
			rate:         median(ok, func(r result) float64 { return r.rate }),
			rssMB:        median(ok, func(r result) float64 { return r.rssMB }),
			cpuPerMsg:    time.Duration(median(ok, func(r result) float64 { return float64(r.cpuPerMsg) })),
			brokerPerMsg: time.Duration(median(ok, func(r result) float64 { return float64(r.brokerPerMsg) })),
			perEntry:     median(ok, func(r result) float64 { return r.perEntry }),
		}
		for _, r := range ok {
			out[c].rounds = append(out[c].rounds, r.rate)
		}
	}
	return out
}

// median is the median of f over rs (the mean of the middle two for an even
// count).
func median(rs []result, f func(result) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	sort.Float64s(vs)
	if len(vs)%2 == 0 {
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return vs[len(vs)/2]
}

// find returns the result of the contender with key, nil when not run or
// failed.
func find(results []result, key string) *result {
	for i := range results {
		if results[i].key == key && results[i].err == nil {
			return &results[i]
		}
	}
	return nil
}

func printTable(results []result, o options) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "contender\tmsg/s\tCPU µs/msg\tbroker µs/msg\tmsg/entry\tpeak RSS MB\tvs tuned loop\tvs default loop\tvs Java\trounds msg/s\n")
	tuned, def, java := find(results, "tuned"), find(results, "default"), find(results, "java")
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(w, "%s\tfailed: %v\t\t\t\t\t\t\t\t\n", r.name, r.err)
			continue
		}
		each := make([]string, len(r.rounds))
		for i, rate := range r.rounds {
			each[i] = fmt.Sprintf("%.0f", rate)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\n", r.name, r.rate, micros(r.cpuPerMsg), micros(r.brokerPerMsg), r.perEntry, r.rssMB,
			ratio(&r, tuned), ratio(&r, def), ratio(&r, java), strings.Join(each, " "))
	}
	subType := "shared"
	if o.failover {
		subType = "failover"
	}
	inputs := "ledger events (the runtime adds their origin)"
	if o.derived {
		inputs = "derived events (their origin passes through)"
	}
	identity := "the runtime's default client settings"
	if o.identityConfig != "" {
		identity = "user config " + o.identityConfig
	}
	payload := fmt.Sprintf("shop-like JSON events of at least %d bytes", o.size)
	if o.payload == "x" {
		payload = fmt.Sprintf("%d bytes of x", o.size)
	}
	fmt.Fprintf(w, "(%d messages, each %s, keyed, with properties; %s; %s subscriptions; identity with %s; "+
		"rate over the last 80%%; medians of %d rounds)\n", o.n, payload, inputs, subType, identity, o.rounds)
	w.Flush()
}

func ratio(r, of *result) string {
	if of == nil || of.rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r.rate/of.rate)
}

// figure is one line of the -json output.
type figure struct {
	Bench      string  `json:"bench"`
	Figure     string  `json:"figure"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
	Limit      string  `json:"limit,omitempty"`
	LimitValue float64 `json:"limit_value,omitempty"`
	Ratio      float64 `json:"ratio,omitempty"`
	Aim        string  `json:"aim,omitempty"`
}

// figures are the medians as JSON figures: each contender's rate, CPU,
// broker CPU and memory, and the identity function's rate against the
// tuned loop (aim ≥ 0.9×), the default loop and Java (aim ≥ 2×). On
// derived inputs every figure's name starts with "derived ".
func figures(results []result, derived bool) []figure {
	var fs []figure
	for _, r := range results {
		if r.err != nil {
			continue
		}
		fs = append(fs,
			figure{Figure: r.key + " rate", Value: math.Round(r.rate), Unit: "msg/s"},
			figure{Figure: r.key + " CPU per message", Value: round1(micros(r.cpuPerMsg)), Unit: "µs"},
			figure{Figure: r.key + " broker CPU per message", Value: round1(micros(r.brokerPerMsg)), Unit: "µs"},
			figure{Figure: r.key + " peak RSS", Value: math.Round(r.rssMB), Unit: "MB"},
		)
	}
	if id := find(results, "identity"); id != nil {
		for _, cmp := range []struct{ key, limit, aim string }{
			{"tuned", "tuned loop", ">= 0.9x"},
			{"tuned-lz4", "tuned loop with LZ4", ">= 0.9x"},
			{"default", "default loop", ""},
			{"java", "Java ExclamationFunction", ">= 2x"},
		} {
			if of := find(results, cmp.key); of != nil {
				fs = append(fs, figure{Figure: "identity vs " + cmp.limit, Value: math.Round(id.rate), Unit: "msg/s",
					Limit: cmp.limit, LimitValue: math.Round(of.rate), Ratio: math.Round(id.rate/of.rate*100) / 100, Aim: cmp.aim})
			}
		}
	}
	for i := range fs {
		fs[i].Bench = "runtime"
		if derived {
			fs[i].Figure = "derived " + fs[i].Figure
		}
	}
	return fs
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// appendJSON appends the figures to path, one JSON object a line.
func appendJSON(path string, fs []figure) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false) // ">= 0.9x" as it is
	for _, fig := range fs {
		if err := enc.Encode(fig); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func (c contender) schemaOrNil() pulsar.Schema {
	if c.schema == nil {
		return nil
	}
	return c.schema()
}

// payloadOf is message i's payload: benchEvent, or xs for -payload x.
func payloadOf(o options, i int, xs []byte) []byte {
	if o.payload == "x" {
		return xs
	}
	return benchEvent(i, o.size)
}

// eventTypes and noteWords make benchEvent's events.
var (
	eventTypes = []string{"item_viewed", "cart_added", "order_placed", "payment_captured"}
	noteWords  = []string{"gift", "express", "red", "size-m", "promo", "returning", "mobile", "eu-west", "bundle", "coupon", "blue", "size-l"}
)

// benchEvent is message i's payload: a shop-like JSON event whose ids,
// quantities and times vary from one message to the next as a ledger's do
// (so that compression does on it what it does on a ledger, not what it
// does on a repeated letter), padded with a note of words to at least size
// bytes.
func benchEvent(i, size int) []byte {
	b := fmt.Appendf(make([]byte, 0, size+16), `{"type":"%s","user_id":"u-%05d","sku":"sku-%04d","qty":%d,"at":"2026-12-04T%02d:%02d:%02d.%03dZ"`,
		eventTypes[i%len(eventTypes)], (i*7919)%100_000, (i*104_729)%5000, 1+i%5, i/3_600_000%24, i/60_000%60, i/1000%60, i%1000)
	if len(b)+len("}") < size {
		b = append(b, `,"note":"`...)
		for w := i; len(b)+len(`"}`) < size; w = w*31 + 7 {
			b = append(b, noteWords[(w&0x7fffffff)%len(noteWords)]...)
			b = append(b, ' ')
		}
		b = append(b, '"')
	}
	return append(b, '}')
}

func prefill(ctx context.Context, client pulsar.Client, c contender, topic string, o options) error {
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 10 * time.Millisecond, Schema: c.schemaOrNil()})
	if err != nil {
		return fmt.Errorf("creating producer for %s: %w", topic, err)
	}
	defer p.Close()
	xs := []byte(strings.Repeat("x", o.size))
	var failed atomic.Pointer[error]
	for i := range o.n {
		props := map[string]string{"type": "bench"}
		if o.derived {
			// In the form the identity function writes (originProperty),
			// which it then passes on unchanged.
			origin := envelope.Origin{Topic: "persistent://bench/ledger/events-partition-0",
				Position: envelope.Position{Ledger: 1234, Entry: int64(i / 100), Batch: int32(i % 100)}}
			if o.identityUC[pf.UserConfigOriginProperty] == "single" {
				origin.SetOn(props)
			} else {
				origin.SetPairOn(props)
			}
		}
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload: payloadOf(o, i, xs), Key: "entity-" + strconv.Itoa(i%1000),
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
func measure(ctx context.Context, o options, client pulsar.Client, c contender, in, out string, n int) result {
	r := result{key: c.key, name: c.name}
	broker := brokerPID()
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
	samples := &sampler{pid: pid, broker: broker}
	go samples.run(ctx)

	// The window is taken from the outputs' publish times, set by the
	// contender's producer, not from when the reader got them: a contender
	// faster than the reader would otherwise be measured at the reader's
	// pace, and its CPU over a window in which it was already idle.
	warm := n / 5
	var first, last time.Time
	for i := 0; i < n; i++ {
		msg, err := reader.Receive(ctx)
		if err != nil {
			r.err = fmt.Errorf("after %d of %d outputs: %w", i, n, err)
			return r
		}
		switch {
		case i == warm:
			first = msg.PublishTime()
		case i > warm && msg.PublishTime().After(last):
			last = msg.PublishTime()
		}
	}
	if !last.After(first) {
		r.err = fmt.Errorf("outputs %d to %d were all published at %v", warm, n, first)
		return r
	}
	samples.waitPast(ctx, last)
	msgs := time.Duration(n - 1 - warm)
	r.rate = float64(msgs) / last.Sub(first).Seconds()
	cpu, brokerCPU := samples.between(first, last)
	r.cpuPerMsg, r.brokerPerMsg = cpu/msgs, brokerCPU/msgs
	r.rssMB = float64(samples.peakRSS()) / 1024
	var stats struct {
		NumberOfEntries float64 `json:"numberOfEntries"`
	}
	if err := adminJSON(o, "GET", "/admin/v2/"+strings.Replace(out, "://", "/", 1)+"/internalStats", &stats); err == nil && stats.NumberOfEntries > 0 {
		r.perEntry = float64(n) / stats.NumberOfEntries
	}
	return r
}

// brokerPID is the pid of the local Pulsar standalone (0: none found; its
// CPU then reads 0).
func brokerPID() int {
	pids := proc.PIDs(func(argv []string) bool { return slices.Contains(argv, "org.apache.pulsar.PulsarStandaloneStarter") })
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// startWithBrokerSlack starts cmd with the timer slack of the broker, which
// the function instances its worker starts inherit (scripts/stack sets it,
// 1 ms by default): a plain loop must wait for timers as they do to be
// their fair limit. A thread's slack passes to the processes it starts, so
// the command is started from a locked thread that has it.
func startWithBrokerSlack(cmd *exec.Cmd) error {
	pid := brokerPID()
	if pid == 0 {
		return cmd.Start()
	}
	slack, err := os.ReadFile(fmt.Sprintf("/proc/%d/timerslack_ns", pid))
	if err != nil {
		return cmd.Start() // no such file before Linux 4.6: Linux's default for both
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// /proc/<tid> names one thread (its file /proc/<pid>/task/<tid> has no
	// timerslack_ns).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/timerslack_ns", syscall.Gettid()), slack, 0); err != nil {
		return fmt.Errorf("giving the plain loop the broker's timer slack: %w", err)
	}
	return cmd.Start()
}

// sampler samples, every 50 ms, the CPU time of the contender's process
// and the broker's and the contender's resident memory.
type sampler struct {
	pid    func() int
	broker int

	mu      sync.Mutex
	samples []sample
	peakKB  int64
}

type sample struct {
	at          time.Time
	cpu, broker time.Duration
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		pid := s.pid()
		if pid > 0 {
			smp := sample{at: time.Now(), cpu: proc.CPUTime(pid), broker: proc.CPUTime(s.broker)}
			kb := proc.RSSKB(pid)
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.peakKB = max(s.peakKB, kb)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitPast waits until a sample later than t has been taken.
func (s *sampler) waitPast(ctx context.Context, t time.Time) {
	for ctx.Err() == nil {
		s.mu.Lock()
		done := len(s.samples) > 0 && s.samples[len(s.samples)-1].at.After(t)
		s.mu.Unlock()
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// between returns the CPU time the contender and the broker used from
// time a to time b, interpolated between samples.
func (s *sampler) between(a, b time.Time) (cpu, broker time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := func(t time.Time) sample {
		i := sort.Search(len(s.samples), func(i int) bool { return !s.samples[i].at.Before(t) })
		switch {
		case i == 0:
			return s.samples[0]
		case i == len(s.samples):
			return s.samples[i-1]
		}
		lo, hi := s.samples[i-1], s.samples[i]
		f := float64(t.Sub(lo.at)) / float64(hi.at.Sub(lo.at))
		lerp := func(x, y time.Duration) time.Duration { return x + time.Duration(f*float64(y-x)) }
		return sample{at: t, cpu: lerp(lo.cpu, hi.cpu), broker: lerp(lo.broker, hi.broker)}
	}
	if len(s.samples) == 0 {
		return 0, 0
	}
	sa, sb := at(a), at(b)
	return sb.cpu - sa.cpu, sb.broker - sa.broker
}

func (s *sampler) peakRSS() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakKB
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
	return adminJSON(o, method, path, nil)
}

// adminJSON is adminDo decoding the response's JSON body into v (none when
// nil).
func adminJSON(o options, method, path string, v any) error {
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
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
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

// newClient is a quiet client of svc's broker with its credentials.
func newClient(svc services.Services) (pulsar.Client, error) {
	opts := svc.PulsarClientOptions()
	opts.Logger = quietLogger()
	return pulsar.NewClient(opts)
}

// withOrigin is msg's properties with its origin added when it has none (a
// ledger event): every Foldline stage writes its input's origin on its
// outputs, and the loop carries one property of the same size, as one
// string, so that the comparison is of the runtime's work and not of the
// origin's cost.
func withOrigin(msg pulsar.Message) map[string]string {
	props := msg.Properties()
	if _, err := envelope.OriginFromProperties(props); err == nil {
		return props
	}
	id := msg.ID()
	out := make(map[string]string, len(props)+1)
	maps.Copy(out, props)
	envelope.Origin{Topic: msg.Topic(), Position: envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}}.SetOn(out)
	return out
}

// loopSettings are the plain loop's settings: tuned, as the runtime's
// defaults (receiver queue 5000, 10 000 pending messages, no compression,
// and its garbage collector: gcPercent 400 and a 160 MB soft limit, which
// spare the loop a sixth of its CPU per message; GOMAXPROCS is Go's, as
// the runtime's maxProcs leaves it by default; its batches as the
// runtime's: 1000 messages, 1 MiB), or the client's
// and Go's defaults with LZ4 and a 10 ms batching delay, as the runtime had
// before its settings became user config. tuned-lz4 is tuned with LZ4, the
// compression foldline deploy gives the functions it deploys: the limit
// too, when it is the faster. gcPercent 0 leaves Go's.
var loopSettings = map[string]loopSetting{
	"tuned":     tunedLoop,
	"tuned-lz4": tunedLoop.with(pulsar.LZ4),
	"default":   {0, 0, pulsar.LZ4, 0, 0, 0, 0},
}

// loopSetting is one entry of loopSettings.
type loopSetting struct {
	receiverQueue, maxPending int
	compression               pulsar.CompressionType
	gcPercent, memoryLimitMB  int
	batchMessages, batchBytes uint
}

// tunedLoop is the tuned loop's setting.
var tunedLoop = loopSetting{5000, 10_000, pulsar.NoCompression, pf.DefaultGCPercent, pf.DefaultMemoryLimitMB, pf.DefaultBatchingMaxMessages, pf.DefaultBatchingMaxSize}

// with returns s compressing with c.
func (s loopSetting) with(c pulsar.CompressionType) loopSetting {
	s.compression = c
	return s
}

// plainLoop is the limit: consume, produce with the same key and
// properties, acknowledge once the send is confirmed.
func plainLoop(args []string) error {
	if len(args) != 6 {
		return errors.New("usage: loop <service-url> <in> <out> failover|shared tuned|tuned-lz4|default <cpu-profile or empty>")
	}
	if args[5] != "" {
		f, err := os.Create(args[5])
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	subType := pulsar.Shared
	if args[3] == "failover" {
		subType = pulsar.Failover
	}
	settings, ok := loopSettings[args[4]]
	if !ok {
		return fmt.Errorf("unknown settings %q: want tuned, tuned-lz4 or default", args[4])
	}
	if settings.gcPercent > 0 {
		debug.SetGCPercent(settings.gcPercent)
		debug.SetMemoryLimit(int64(settings.memoryLimitMB) << 20)
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
		Type: subType, ReceiverQueueSize: settings.receiverQueue,
	})
	if err != nil {
		return err
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic: args[2], BatchingMaxPublishDelay: 10 * time.Millisecond, CompressionType: settings.compression,
		MaxPendingMessages:  settings.maxPending,
		BatchingMaxMessages: settings.batchMessages, BatchingMaxSize: settings.batchBytes,
	})
	if err != nil {
		return err
	}
	defer producer.Close()
	// The loop runs on its own goroutine, as plain as it can be; SIGTERM
	// returns, which writes the CPU profile.
	go func() {
		for cm := range consumer.Chan() {
			msg := cm.Message
			producer.SendAsync(context.Background(), &pulsar.ProducerMessage{
				Payload: msg.Payload(), Key: msg.Key(), Properties: withOrigin(msg), EventTime: msg.EventTime(),
			}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err == nil {
					_ = consumer.Ack(msg)
				}
			})
		}
	}()
	<-ctx.Done()
	return nil
}
