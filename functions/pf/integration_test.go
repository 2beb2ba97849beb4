package pf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/testenv"
)

// functionStatus is the part of `functions status` the test reads.
type functionStatus struct {
	NumInstances int `json:"numInstances"`
	NumRunning   int `json:"numRunning"`
	Instances    []struct {
		Status struct {
			Running                  bool   `json:"running"`
			Error                    string `json:"error"`
			NumRestarts              int64  `json:"numRestarts"`
			NumReceived              int64  `json:"numReceived"`
			NumSuccessfullyProcessed int64  `json:"numSuccessfullyProcessed"`
			NumUserExceptions        int64  `json:"numUserExceptions"`
		} `json:"status"`
	} `json:"instances"`
}

// functionStats is the part of `functions stats` the test reads.
type functionStats struct {
	ReceivedTotal              int64 `json:"receivedTotal"`
	ProcessedSuccessfullyTotal int64 `json:"processedSuccessfullyTotal"`
	UserExceptionsTotal        int64 `json:"userExceptionsTotal"`
	Instances                  []struct {
		Metrics struct {
			UserMetrics map[string]float64 `json:"userMetrics"`
		} `json:"metrics"`
	} `json:"instances"`
}

// deployment is one example function deployed under the worker in a
// namespace of its own.
type deployment struct {
	s                   testenv.Services
	tenant, ns, name    string
	in, out, dead, subs string
	client              pulsar.Client
	producer            pulsar.Producer
}

// cleanUp removes the function and the namespace with its topics (the
// broker refuses to force-delete namespaces by default).
func (d *deployment) cleanUp(t *testing.T) {
	adminREST(t, d.s, "DELETE", d.path(), nil)
	var topics []string
	adminREST(t, d.s, "GET", "/admin/v2/namespaces/"+d.tenant+"/"+d.ns+"/topics", &topics)
	for _, topic := range topics {
		adminREST(t, d.s, "DELETE", "/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"?force=true", nil)
	}
	if code := adminREST(t, d.s, "DELETE", "/admin/v2/namespaces/"+d.tenant+"/"+d.ns, nil); code >= 300 {
		t.Logf("deleting namespace %s/%s: HTTP %d", d.tenant, d.ns, code)
	}
}

func (d *deployment) path() string {
	return "/admin/v3/functions/" + d.tenant + "/" + d.ns + "/" + d.name
}

func (d *deployment) status(t *testing.T) functionStatus {
	t.Helper()
	var st functionStatus
	adminREST(t, d.s, "GET", d.path()+"/status", &st)
	return st
}

// publish sends payloads with key "key-<payload>" and a property, returning
// the message ids.
func (d *deployment) publish(t *testing.T, payloads ...string) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, len(payloads))
	for i, p := range payloads {
		id, err := d.producer.Send(t.Context(), &pulsar.ProducerMessage{
			Payload:    []byte(p),
			Key:        "key-" + p,
			Properties: map[string]string{"test.payload": p},
			EventTime:  eventTimeOf(p),
		})
		if err != nil {
			t.Fatalf("publishing %s: %v", p, err)
		}
		ids[i] = id
	}
	return ids
}

func eventTimeOf(payload string) time.Time {
	return time.UnixMilli(1_700_000_000_000 + int64(len(payload))*1000).UTC()
}

func (d *deployment) subscribe(t *testing.T, topic string) pulsar.Consumer {
	t.Helper()
	c, err := d.client.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "pftest-reader", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatalf("subscribing to %s: %v", topic, err)
	}
	t.Cleanup(c.Close)
	return c
}

// receive returns the next n messages of c.
func receive(t *testing.T, c pulsar.Consumer, n int, timeout time.Duration) []pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	msgs := make([]pulsar.Message, 0, n)
	for len(msgs) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("received %d of %d messages from %s: %v", len(msgs), n, c.Subscription(), err)
		}
		_ = c.Ack(m)
		msgs = append(msgs, m)
	}
	return msgs
}

func payloads(msgs []pulsar.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Payload())
	}
	return out
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func exclaimed(in []string) []string {
	out := make([]string, len(in))
	for i, p := range in {
		out[i] = p + "!"
	}
	return out
}

func positionOf(id pulsar.MessageID) string {
	return envelope.Position{Ledger: id.LedgerID(), Entry: id.EntryID(), Batch: id.BatchIdx()}.String()
}

// The exclaim example deployed with the distribution's pulsar-admin runs
// under the worker: it sees history (Earliest), keeps keys, properties,
// event time, origin and order, dead-letters failures while it keeps
// running, reports true counts to functions status and stats, survives
// kill -9 without losing messages, and its delete removes the subscription.
func TestFunctionUnderWorker(t *testing.T) {
	s := testenv.Pulsar(t)
	d := &deployment{s: s, tenant: "public", ns: fmt.Sprintf("pftest-%d", rand.IntN(1_000_000)), name: "exclaim", subs: "pftest-sub"}
	prefix := "persistent://" + d.tenant + "/" + d.ns + "/"
	d.in, d.out, d.dead = prefix+"in", prefix+"out", prefix+"dead"

	if code := adminREST(t, s, "PUT", "/admin/v2/namespaces/"+d.tenant+"/"+d.ns, nil); code >= 300 {
		t.Fatalf("creating namespace %s: HTTP %d", d.ns, code)
	}
	t.Cleanup(func() { d.cleanUp(t) })
	d.client = newTestClient(t, s)
	d.producer = newTestProducer(t, d.client, d.in)
	out := d.subscribe(t, d.out)
	dead := d.subscribe(t, d.dead)

	early := seq("early", 5)
	earlyIDs := d.publish(t, early...)

	bin := buildExample(t, "exclaim")
	pulsarAdmin(t, "functions", "create", "--go", bin,
		"--tenant", d.tenant, "--namespace", d.ns, "--name", d.name,
		"--inputs", d.in, "--output", d.out,
		"--subs-name", d.subs, "--subs-position", "Earliest", "--retain-ordering",
		"--user-config", `{"maxRetries":2,"retryBackoffMs":200,"deadLetterTopic":"`+d.dead+`"}`,
		"--secrets", functionSecrets(t, d.s))
	testenv.WaitFor(t, 3*time.Minute, "the function to run", func() bool {
		st := d.status(t)
		return st.NumRunning == 1 && len(st.Instances) == 1 && st.Instances[0].Status.Running
	})

	t.Run("earliest sees messages published before the function existed", func(t *testing.T) {
		got := receive(t, out, len(early), time.Minute)
		if !slices.Equal(payloads(got), exclaimed(early)) {
			t.Fatalf("outputs %q, want %q", payloads(got), exclaimed(early))
		}
		for i, m := range got {
			if m.Properties()[envelope.PropOriginPosition] != positionOf(earlyIDs[i]) {
				t.Errorf("output %d origin %v, want %s", i, m.Properties(), positionOf(earlyIDs[i]))
			}
		}
	})

	keyed := seq("msg", 20)
	t.Run("outputs keep key, properties, event time, origin and order", func(t *testing.T) {
		ids := d.publish(t, keyed...)
		got := receive(t, out, len(keyed), time.Minute)
		if !slices.Equal(payloads(got), exclaimed(keyed)) {
			t.Fatalf("outputs %q, want %q in this order", payloads(got), exclaimed(keyed))
		}
		for i, m := range got {
			p := keyed[i]
			props := m.Properties()
			if m.Key() != "key-"+p || props["test.payload"] != p || !m.EventTime().Equal(eventTimeOf(p)) ||
				props[envelope.PropOriginTopic] != d.in || props[envelope.PropOriginPosition] != positionOf(ids[i]) {
				t.Errorf("output of %s: key %q, event time %v, properties %v; want key key-%s, time %v, origin %s %s",
					p, m.Key(), m.EventTime(), props, p, eventTimeOf(p), d.in, positionOf(ids[i]))
			}
		}
	})

	pidBefore := testenv.InstancePIDs(t, d.tenant, d.ns, d.name)
	t.Run("failures go to the dead-letter topic and the instance keeps running", func(t *testing.T) {
		after := seq("after", 3)
		ids := d.publish(t, append([]string{"boom-a", "poison-b"}, after...)...)
		letters := receive(t, dead, 2, 2*time.Minute)
		want := []struct{ payload, attempts, reason string }{
			{"boom-a", "3", "payload went boom"},
			{"poison-b", "1", "payload is poison"},
		}
		for i, w := range want {
			m := letters[i]
			props := m.Properties()
			if string(m.Payload()) != w.payload || m.Key() != "key-"+w.payload ||
				props[envelope.PropDeadLetterAttempts] != w.attempts || props[envelope.PropDeadLetterReason] != w.reason ||
				props[envelope.PropDeadLetterSource] != d.in || props[envelope.PropDeadLetterFunction] != d.tenant+"/"+d.ns+"/"+d.name ||
				props[envelope.PropOriginTopic] != d.in || props[envelope.PropOriginPosition] != positionOf(ids[i]) {
				t.Errorf("dead letter %d: payload %q key %q properties %v; want %+v from %s at %s",
					i, m.Payload(), m.Key(), props, w, d.in, positionOf(ids[i]))
			}
		}
		if got := receive(t, out, len(after), time.Minute); !slices.Equal(payloads(got), exclaimed(after)) {
			t.Errorf("outputs after the failures %q, want %q", payloads(got), exclaimed(after))
		}
		if pids := testenv.InstancePIDs(t, d.tenant, d.ns, d.name); len(pidBefore) != 1 || !slices.Equal(pids, pidBefore) {
			t.Errorf("instance pids %v before, %v after the failures; want the same single process", pidBefore, pids)
		}
	})

	t.Run("functions status and stats show true counts", func(t *testing.T) {
		const received, processed, userErrors = 5 + 20 + 5, 5 + 20 + 3, 3 + 1
		testenv.WaitFor(t, time.Minute, "status counts", func() bool {
			st := d.status(t).Instances[0].Status
			return st.NumReceived == received && st.NumSuccessfullyProcessed == processed && st.NumUserExceptions == userErrors
		})
		// The broker's metrics page includes the instance's, fetched from its metricsPort.
		series := fmt.Sprintf(`pulsar_function_processed_successfully_total{cluster="standalone",fqfn="%s/%s/%s",instance_id="0",name="%s",namespace="%s/%s",tenant="%s"} %d`,
			d.tenant, d.ns, d.name, d.name, d.tenant, d.ns, d.tenant, processed)
		// The foldline_ additions come through the same way: the dead
		// letters by reason class, and the handler's own histogram with
		// its buckets (the worker copies the text, it does not reduce
		// histograms to summaries).
		labels := fmt.Sprintf(`cluster="standalone",fqfn="%s/%s/%s",instance_id="0",name="%s",namespace="%s/%s"`,
			d.tenant, d.ns, d.name, d.name, d.tenant, d.ns)
		want := []string{
			series,
			fmt.Sprintf(`%s{%s,reason="retries_exhausted",tenant="%s"} 1`, pf.MetricDeadLetters, labels, d.tenant),
			fmt.Sprintf(`%s{%s,reason="rejected",tenant="%s"} 1`, pf.MetricDeadLetters, labels, d.tenant),
			fmt.Sprintf(`%s{%s,reason="malformed",tenant="%s"} 0`, pf.MetricDeadLetters, labels, d.tenant),
			fmt.Sprintf(`exclaim_payload_bytes_bucket{%s,tenant="%s",le="+Inf"} %d`, labels, d.tenant, processed),
		}
		var page string
		testenv.WaitFor(t, time.Minute, "the broker's /metrics to show the instance's metrics", func() bool {
			adminREST(t, s, "GET", "/metrics/", &page)
			for _, w := range want {
				if !strings.Contains(page, w) {
					return false
				}
			}
			return true
		})
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("the broker's /metrics lacks %s", w)
			}
		}
		var st functionStatus
		if err := json.Unmarshal([]byte(pulsarAdmin(t, "functions", "status", "--tenant", d.tenant, "--namespace", d.ns, "--name", d.name)), &st); err != nil {
			t.Fatal(err)
		}
		if is := st.Instances[0].Status; st.NumRunning != 1 || !is.Running || is.NumReceived != received ||
			is.NumSuccessfullyProcessed != processed || is.NumUserExceptions != userErrors || is.NumRestarts != 0 {
			t.Errorf("pulsar-admin functions status: %+v", st)
		}
		var stats functionStats
		if err := json.Unmarshal([]byte(pulsarAdmin(t, "functions", "stats", "--tenant", d.tenant, "--namespace", d.ns, "--name", d.name)), &stats); err != nil {
			t.Fatal(err)
		}
		if stats.ReceivedTotal != received || stats.ProcessedSuccessfullyTotal != processed || stats.UserExceptionsTotal != userErrors ||
			len(stats.Instances) != 1 || stats.Instances[0].Metrics.UserMetrics["payload_bytes"] == 0 {
			t.Errorf("pulsar-admin functions stats: %+v", stats)
		}
	})

	t.Run("kill -9 of the instance loses nothing", func(t *testing.T) {
		pids := testenv.InstancePIDs(t, d.tenant, d.ns, d.name)
		if len(pids) != 1 {
			t.Fatalf("instance pids %v, want one", pids)
		}
		before, afterKill := seq("prekill", 15), seq("postkill", 15)
		d.publish(t, before...)
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		d.publish(t, afterKill...)
		testenv.WaitFor(t, 2*time.Minute, "the worker to restart the instance", func() bool {
			now := testenv.InstancePIDs(t, d.tenant, d.ns, d.name)
			return len(now) == 1 && now[0] != pids[0] && d.status(t).NumRunning == 1
		})
		missing := map[string]bool{}
		for _, p := range exclaimed(append(before, afterKill...)) {
			missing[p] = true
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		for len(missing) > 0 {
			m, err := out.Receive(ctx)
			if err != nil {
				t.Fatalf("outputs still missing after the restart: %v (%v)", keysOf(missing), err)
			}
			_ = out.Ack(m)
			delete(missing, string(m.Payload())) // redelivered duplicates are allowed
		}
	})

	t.Run("functions delete removes the subscription", func(t *testing.T) {
		pulsarAdmin(t, "functions", "delete", "--tenant", d.tenant, "--namespace", d.ns, "--name", d.name)
		testenv.WaitFor(t, time.Minute, "subscription "+d.subs+" to go", func() bool {
			var subs []string
			adminREST(t, s, "GET", "/admin/v2/persistent/"+d.tenant+"/"+d.ns+"/in/subscriptions", &subs)
			return !slices.Contains(subs, d.subs)
		})
		testenv.WaitFor(t, time.Minute, "the instance process to exit", func() bool {
			return len(testenv.InstancePIDs(t, d.tenant, d.ns, d.name)) == 0
		})
	})
}

func quietLogger() pulsarlog.Logger {
	return pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func keysOf(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
