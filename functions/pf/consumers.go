package pf

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// probeEvery is how often an idle instance asks the broker about its
// consumers.
const probeEvery = 20 * time.Second

// consumers holds the instance's consumers, one per input, and subscribes
// again for one that the broker has forgotten.
//
// Why: when a topic is unloaded (a broker restart, a bundle moved, an
// operator's unload) while a consumer is reconnecting, the broker may close
// the consumer just as pulsar-client-go (v0.19) registers it; the client
// never learns, believes itself connected, and receives nothing while the
// subscription's backlog grows with no consumer attached. Seen here in a
// test that unloads topics while events flow. The broker answers a request
// about such a consumer with an error, so an idle instance asks
// (GetLastMessageIDs, which the client retries for its operation timeout
// before giving up) and subscribes again when it fails.
type consumers struct {
	subscribe func(inputSpec) (pulsar.Consumer, error)
	specs     []inputSpec
	log       *slog.Logger

	mu     sync.Mutex
	list   []pulsar.Consumer // nil where a subscription failed: retried on probe
	closed bool
}

func newConsumers(specs []inputSpec, subscribe func(inputSpec) (pulsar.Consumer, error), log *slog.Logger) (*consumers, error) {
	cs := &consumers{subscribe: subscribe, specs: specs, log: log, list: make([]pulsar.Consumer, len(specs))}
	for i, spec := range specs {
		c, err := subscribe(spec)
		if err != nil {
			cs.close()
			return nil, err
		}
		cs.list[i] = c
	}
	return cs, nil
}

// watch probes the consumers every probeEvery while the instance received
// nothing since the last probe (received counts what it received), until
// ctx ends.
func (cs *consumers) watch(ctx context.Context, received func() int64) {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	last := received()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now := received(); now != last {
			last = now
			continue
		}
		cs.probe(ctx)
		last = received()
	}
}

// probe asks the broker about each consumer and subscribes again for one it
// does not know (or one whose subscription failed before).
func (cs *consumers) probe(ctx context.Context) {
	for i, spec := range cs.specs {
		cs.mu.Lock()
		c := cs.list[i]
		cs.mu.Unlock()
		if c != nil {
			_, err := c.GetLastMessageIDs()
			if err == nil || ctx.Err() != nil {
				continue
			}
			cs.log.Warn("the broker does not know this consumer; subscribing again", "topic", spec.Topic, "error", err)
			c.Close()
		}
		fresh, err := cs.subscribe(spec)
		if err != nil {
			cs.log.Warn("subscribing again failed; retrying at the next probe", "topic", spec.Topic, "error", err)
		}
		cs.mu.Lock()
		if cs.closed && fresh != nil {
			fresh.Close() // the instance shut down meanwhile
			fresh = nil
		}
		cs.list[i] = fresh
		cs.mu.Unlock()
		if fresh != nil {
			cs.log.Info("subscribed again", "topic", spec.Topic)
		}
	}
}

// close closes every consumer.
func (cs *consumers) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for i, c := range cs.list {
		if c != nil {
			c.Close()
			cs.list[i] = nil
		}
	}
}
