package pf

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
)

// TestTopicEpochsReadTheTopicsOwn checks that a ledger event without an
// epoch takes the one its topic has now: read once per ledger, read again
// at a new ledger (a topic deleted and created again has new ledgers and
// another epoch), the partitioned topic's for a partition, and a fresh one
// written to a topic that has none.
func TestTopicEpochsReadTheTopicsOwn(t *testing.T) {
	const topic = "persistent://shop/ledger/events"
	var (
		mu    sync.Mutex
		props = map[string]string{envelope.PropLedgerEpoch: "20261201T000000Z-aaaaaaaa"}
		gets  int
		auth  string
	)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/admin/v2/persistent/shop/ledger/events/properties" {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		switch r.Method {
		case http.MethodGet:
			gets++
			_ = json.NewEncoder(w).Encode(props)
		case http.MethodPut:
			var update map[string]string
			if err := json.NewDecoder(r.Body).Decode(&update); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for k, v := range update {
				props[k] = v
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer server.Close()
	finder, err := newTopicEpochs(&instanceConf{AdminURL: server.URL + "/", Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	te := finder.(*topicEpochs)
	te.settle = 0
	ctx := context.Background()
	epoch := func(topic string, ledger int64) string {
		t.Helper()
		e, err := finder.epochOf(ctx, topic, ledger)
		if err != nil {
			t.Fatalf("epoch of %s@%d: %v", topic, ledger, err)
		}
		return e
	}
	if got := epoch(topic, 10); got != "20261201T000000Z-aaaaaaaa" || auth != "Bearer secret" {
		t.Fatalf("epoch %q (authorization %q), want the topic's, with the function's token", got, auth)
	}
	epoch(topic, 10)
	epoch(topic+"-partition-0", 10)
	if gets != 1 {
		t.Errorf("%d reads for one ledger, want 1", gets)
	}
	// The topic deleted and created again by a consumer: no epoch, new ledgers.
	mu.Lock()
	delete(props, envelope.PropLedgerEpoch)
	mu.Unlock()
	fresh := epoch(topic, 20)
	if fresh == "" || fresh == "20261201T000000Z-aaaaaaaa" || envelope.CheckEpoch(fresh) != nil {
		t.Errorf("epoch of a topic without one: %q, want a fresh one", fresh)
	}
	if props[envelope.PropLedgerEpoch] != fresh {
		t.Errorf("the topic has epoch %q, the event got %q", props[envelope.PropLedgerEpoch], fresh)
	}
	// Events of the old ledger, still in flight, keep the old epoch.
	if got := epoch(topic, 10); got != "20261201T000000Z-aaaaaaaa" {
		t.Errorf("epoch of an event of the old ledger: %q", got)
	}
	server.Close()
	if _, err := finder.epochOf(ctx, topic, 30); err == nil || !errors.Is(err, errEpochLookup) {
		t.Errorf("epoch with the admin API down: %v, want errEpochLookup", err)
	}
}
