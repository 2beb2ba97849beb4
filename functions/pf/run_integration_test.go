package pf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/testenv"
)

// Run in this process, against the real broker, without the worker: regex
// inputs with Earliest, a Key_Shared subscription taken from user config,
// records to a second topic, log lines forwarded to the log topic, and a
// shutdown that returns well within the worker's 10 s grace.
func TestRunAgainstBroker(t *testing.T) {
	d, prefix := newInProcessDeployment(t, "runner")
	s := d.s

	// Topics matched by the pattern must exist when the consumer starts:
	// pattern discovery runs only once a minute.
	inputs := []string{prefix + "in-a", prefix + "in-b"}
	var sent []string
	for _, topic := range inputs {
		d.producer = newTestProducer(t, d.client, topic)
		p := seq(topic[len(prefix):], 3)
		d.publish(t, p...)
		sent = append(sent, p...)
	}
	out, side, logs := d.subscribe(t, prefix+"out"), d.subscribe(t, prefix+"side"), d.subscribe(t, prefix+"log")

	details, err := json.Marshal(map[string]any{
		"tenant": d.tenant, "namespace": d.ns, "name": d.name, "logTopic": prefix + "log",
		"userConfig": `{"subscriptionType":"key_shared"}`,
		"secretsMap": functionSecrets(t, s),
		"source": map[string]any{
			"subscriptionPosition": "EARLIEST",
			"inputSpecs":           map[string]any{prefix + "in-.*": map[string]any{"isRegexPattern": true}},
		},
		"sink": map[string]any{"topic": prefix + "out"},
	})
	if err != nil {
		t.Fatal(err)
	}
	conf := instanceConf(t, s, details)
	handler := func(ctx context.Context, in []byte) ([]pf.Record, error) {
		slog.Info("handled", "payload", string(in))
		return []pf.Record{{Payload: in}, {Topic: prefix + "side", Key: "side", Payload: in}}, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pf.Run(ctx, handler, []string{"-instance-conf", string(conf)}) }()

	got := payloads(receive(t, out, len(sent), time.Minute))
	slices.Sort(got)
	if !slices.Equal(got, sent) {
		t.Errorf("outputs %q, want %q", got, sent)
	}
	for _, m := range receive(t, side, len(sent), time.Minute) {
		if m.Key() != "side" {
			t.Errorf("side record key %q, want side", m.Key())
		}
	}
	for _, m := range receive(t, logs, 1, time.Minute) {
		if m.Properties()["function"] != d.tenant+"/"+d.ns+"/"+d.name || !strings.Contains(string(m.Payload()), "msg=") {
			t.Errorf("log line %q with properties %v", m.Payload(), m.Properties())
		}
	}
	var stats struct {
		Subscriptions map[string]struct {
			Type string `json:"type"`
		} `json:"subscriptions"`
	}
	adminREST(t, s, "GET", "/admin/v2/persistent/"+d.tenant+"/"+d.ns+"/in-a/stats", &stats)
	if sub := stats.Subscriptions[d.tenant+"/"+d.ns+"/"+d.name]; sub.Type != "Key_Shared" {
		t.Errorf("subscriptions %+v, want %s/%s/%s of type Key_Shared", stats.Subscriptions, d.tenant, d.ns, d.name)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within the worker's 10 s grace after cancel")
	}
}

// newInProcessDeployment makes a namespace of its own for a function run in
// this process, removed after the test, and a client; it returns the
// namespace's topic prefix.
func newInProcessDeployment(t *testing.T, name string) (*deployment, string) {
	t.Helper()
	s := testenv.Pulsar(t)
	d := &deployment{s: s, tenant: "public", ns: fmt.Sprintf("pftest-%d", rand.IntN(1_000_000)), name: name}
	if code := adminREST(t, s, "PUT", "/admin/v2/namespaces/"+d.tenant+"/"+d.ns, nil); code >= 300 {
		t.Fatalf("creating namespace %s: HTTP %d", d.ns, code)
	}
	t.Cleanup(func() { d.cleanUp(t) })
	d.client = newTestClient(t, s)
	return d, "persistent://" + d.tenant + "/" + d.ns + "/"
}

// instanceConf is the -instance-conf the worker would give a function with
// these functionDetails.
func instanceConf(t *testing.T, s testenv.Services, details []byte) []byte {
	t.Helper()
	conf, err := json.Marshal(map[string]any{"pulsarServiceURL": s.PulsarURL, "functionDetails": string(details)})
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

func newTestClient(t *testing.T, s testenv.Services) pulsar.Client {
	t.Helper()
	opts := s.PulsarClientOptions()
	opts.Logger = quietLogger()
	client, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func newTestProducer(t *testing.T, client pulsar.Client, topic string) pulsar.Producer {
	t.Helper()
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
