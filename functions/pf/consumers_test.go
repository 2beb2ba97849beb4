package pf

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// probedConsumer is a consumer whose broker knows it or not.
type probedConsumer struct {
	pulsar.Consumer
	name   string
	known  bool
	closed bool
}

func (c *probedConsumer) GetLastMessageIDs() ([]pulsar.TopicMessageID, error) {
	if !c.known {
		return nil, errors.New("server error: consumer not found")
	}
	return nil, nil
}

func (c *probedConsumer) Close() { c.closed = true }

// TestProbeSubscribesAgainForForgottenConsumers: a consumer the broker no
// longer knows is closed and replaced, a known one is left alone, and a
// subscription that failed is tried again at the next probe.
func TestProbeSubscribesAgainForForgottenConsumers(t *testing.T) {
	specs := []inputSpec{{Topic: "a"}, {Topic: "b"}}
	var subscribed []string
	failB := false
	subscribe := func(in inputSpec) (pulsar.Consumer, error) {
		if in.Topic == "b" && failB {
			return nil, errors.New("broker busy")
		}
		subscribed = append(subscribed, in.Topic)
		return &probedConsumer{name: in.Topic + "#" + string(rune('0'+len(subscribed))), known: true}, nil
	}
	cs, err := newConsumers(specs, subscribe, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cs.list[0].(*probedConsumer), cs.list[1].(*probedConsumer)

	cs.probe(context.Background())
	if len(subscribed) != 2 || a.closed || b.closed {
		t.Fatalf("probe of known consumers subscribed %v, closed a %v b %v; want nothing done", subscribed, a.closed, b.closed)
	}

	b.known, failB = false, true
	cs.probe(context.Background())
	if !b.closed || cs.list[1] != nil || cs.list[0] != a || a.closed {
		t.Fatalf("after b was forgotten and its new subscription failed: b closed %v, list %v", b.closed, cs.list)
	}

	failB = false
	cs.probe(context.Background())
	if fresh, ok := cs.list[1].(*probedConsumer); !ok || fresh == b || !fresh.known {
		t.Fatalf("the failed subscription was not tried again: list %v", cs.list)
	}

	cs.close()
	if !a.closed || cs.list[0] != nil || cs.list[1] != nil {
		t.Fatalf("close left consumers open: %v", cs.list)
	}
}
