package pf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/pf"
)

// An output over the broker's 5 MB maxMessageSize can never be sent: the
// real producer refuses it (maxMessageBytes is set above the broker's limit
// so that the producer's refusal, not the runtime's own check, is what
// decides), the input goes to the dead-letter topic with the reason, and
// the instance goes on with later messages.
func TestOutputTooLargeForTheBrokerIsDeadLettered(t *testing.T) {
	d, prefix := newInProcessDeployment(t, "grower")
	d.producer = newTestProducer(t, d.client, prefix+"in")
	d.publish(t, "a", "big", "b")
	out, dlq := d.subscribe(t, prefix+"out"), d.subscribe(t, prefix+"grower-DLQ")

	details, err := json.Marshal(map[string]any{
		"tenant": d.tenant, "namespace": d.ns, "name": d.name,
		"userConfig": `{"maxMessageBytes":67108864}`,
		"secretsMap": functionSecrets(t, d.s),
		"source": map[string]any{
			"subscriptionPosition": "EARLIEST", "subscriptionType": "FAILOVER",
			"inputSpecs": map[string]any{prefix + "in": map[string]any{}},
		},
		"sink": map[string]any{"topic": prefix + "out"},
	})
	if err != nil {
		t.Fatal(err)
	}
	conf := instanceConf(t, d.s, details)
	handler := func(in []byte) ([]byte, error) {
		if string(in) == "big" {
			return bytes.Repeat([]byte("x"), 7<<20), nil // a 4 MB event grown by validation, say
		}
		return in, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pf.Run(ctx, handler, []string{"-instance-conf", string(conf)}) }()

	if got := payloads(receive(t, out, 2, time.Minute)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("outputs %q, want a and b", got)
	}
	dead := receive(t, dlq, 1, time.Minute)[0]
	if string(dead.Payload()) != "big" || !strings.Contains(dead.Properties()[envelope.PropDeadLetterReason], "message size exceeds MaxMessageSize") {
		t.Errorf("dead letter %q with reason %q", dead.Payload(), dead.Properties()[envelope.PropDeadLetterReason])
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of cancel")
	}
}
