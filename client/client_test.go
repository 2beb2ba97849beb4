package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/foldline/foldline/client"
)

func TestMessage(t *testing.T) {
	p, err := client.New(client.Options{Client: pulsarClient, Tenant: tenant, IDField: "event_id"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tests := []struct {
		name  string
		event string
		key   string
		err   error
	}{
		{name: "string id", event: `{"event_id":"a","user":"u1","time":"2026-12-01T10:00:00Z"}`, key: "u1"},
		{name: "number id", event: `{"event_id":7,"user":"u2"}`, key: "u2"},
		{name: "no id", event: `{"id":"a","user":"u1"}`, err: client.ErrNoID},
		{name: "empty id", event: `{"event_id":"","user":"u1"}`, err: client.ErrNoID},
		{name: "null id", event: `{"event_id":null}`, err: client.ErrNoID},
		{name: "not an object", event: `[1]`, err: client.ErrNotJSON},
		{name: "not JSON", event: `{"event_id":`, err: client.ErrNotJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := p.Message([]byte(tt.event))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err == nil && msg.Key != tt.key {
				t.Errorf("key %q, want %q", msg.Key, tt.key)
			}
		})
	}
}

// TestPublishAsyncKeepsOrder publishes from one goroutine asynchronously:
// every event reaches the ledger, in order, with its key and time.
func TestPublishAsyncKeepsOrder(t *testing.T) {
	p, err := client.New(client.Options{Client: pulsarClient, Topic: client.DefaultTopic(tenant) + "-async"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var (
		mu   sync.Mutex
		errs []error
		want []string
	)
	for i := range 2000 {
		id := fmt.Sprintf("a-%d", i)
		want = append(want, id)
		event := fmt.Sprintf(`{"id":%q,"user":"u%d","time":"2026-12-01T10:00:%02dZ"}`, id, i%10, i%60)
		p.PublishAsync(context.Background(), []byte(event), func(err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if got := ledgerIDsOf(t, client.DefaultTopic(tenant)+"-async"); !slices.Equal(got, want) {
		t.Errorf("the ledger holds %d events, want the %d published, in order", len(got), len(want))
	}
}
