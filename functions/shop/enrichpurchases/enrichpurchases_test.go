package enrichpurchases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/shop/enrichpurchases"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

func msg(user, payload string, entry int64) transform.Message {
	return transform.Message{Key: user, Payload: []byte(payload), Origin: envelope.Origin{
		Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 5, Entry: entry},
	}}
}

func pageView(id, user string) string {
	return fmt.Sprintf(`{"id":%q,"type":"page_view","user":%q,"time":"2026-11-01T10:00:00Z","url":"/p/1"}`, id, user)
}

func purchase(id, user, sku string) string {
	return fmt.Sprintf(`{"id":%q,"type":"purchase","user":%q,"time":"2026-11-01T10:05:00.5Z","order":"o-%s","sku":%q,"qty":2,"price_cents":500}`, id, user, id, sku)
}

func TestContract(t *testing.T) {
	transformtest.RunStateful(t, enrichpurchases.Transformation,
		msg("u1", pageView("e-1", "u1"), 1),
		msg("u1", purchase("e-2", "u1", "sku-7"), 2),
		msg("u2", purchase("e-3", "u2", "sku-7"), 3),
		msg("u1", pageView("e-4", "u1"), 4),
		msg("u1", `{"id":"e-5","type":"refund","user":"u1","time":"2026-11-01T11:00:00Z","order":"o-e-2","amount_cents":300}`, 5),
		msg("u1", purchase("e-6", "u1", "sku-8"), 6),
	)
	transformtest.StateRoundTrips(t, enrichpurchases.State{PageViews: 41})
}

// process runs the stage with one store, settling each input at once.
func process(store *keyed.Store, m transform.Message) ([]transform.Record, error) {
	recs, txn, err := enrichpurchases.Transformation.ProcessKeyed(context.Background(), store, m)
	if txn != nil {
		txn.Settle(func(error) {})
	}
	return recs, err
}

// TestEqualsBruteForceFold runs random ledgers of page views, purchases
// and other events of a few users through the stage, with a new process
// (from the saved states) now and then and inputs delivered again, and
// checks each enriched purchase against a count of its user's page views
// before it in the ledger.
func TestEqualsBruteForceFold(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 47))
			var ledger []transform.Message
			for i := range 200 {
				user := fmt.Sprintf("u%d", rng.IntN(5))
				id := fmt.Sprintf("e-%d", i)
				var payload string
				switch rng.IntN(4) {
				case 0, 1:
					payload = pageView(id, user)
				case 2:
					payload = purchase(id, user, fmt.Sprintf("sku-%d", rng.IntN(3)))
				default:
					payload = fmt.Sprintf(`{"id":%q,"type":"add_to_cart","user":%q,"time":"2026-11-01T10:00:00Z","sku":"sku-1","qty":1}`, id, user)
				}
				ledger = append(ledger, msg(user, payload, int64(i)))
			}
			// The brute force: for each purchase, the page views of its
			// user among all the events before it.
			var want []enrichpurchases.Purchase
			for i, m := range ledger {
				if !strings.Contains(string(m.Payload), `"type":"purchase"`) {
					continue
				}
				var p enrichpurchases.Purchase
				if err := json.Unmarshal(m.Payload, &p); err != nil {
					t.Fatal(err)
				}
				for _, before := range ledger[:i] {
					if before.Key == m.Key && strings.Contains(string(before.Payload), `"type":"page_view"`) {
						p.PageViewsBefore++
					}
				}
				want = append(want, p)
			}

			backend := keyed.NewMemory()
			codec := enrichpurchases.Transformation.StateCodec()
			store := keyed.New(backend, codec, keyed.Options{Inline: true})
			var got []enrichpurchases.Purchase
			for i := 0; i < len(ledger); i++ {
				if rng.IntN(20) == 0 { // a new process, from the saved states
					store = keyed.New(backend, codec, keyed.Options{Inline: true})
				}
				if i > 0 && rng.IntN(10) == 0 { // the last few inputs again
					for _, m := range ledger[max(0, i-1-rng.IntN(4)):i] {
						if recs, err := process(store, m); err != nil || len(recs) != 0 {
							t.Fatalf("%s delivered again: %v, %d records; want nothing", m.Payload, err, len(recs))
						}
					}
				}
				recs, err := process(store, ledger[i])
				if err != nil {
					t.Fatalf("%s: %v", ledger[i].Payload, err)
				}
				for _, r := range recs {
					var p enrichpurchases.Purchase
					if err := json.Unmarshal(r.Payload, &p); err != nil {
						t.Fatalf("enriched purchase %s: %v", r.Payload, err)
					}
					if r.Key != p.SKU || !r.EventTime.Equal(p.Time) {
						t.Errorf("enriched purchase %s keyed %q at %v, want its sku at its time", r.Payload, r.Key, r.EventTime)
					}
					got = append(got, p)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d enriched purchases, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("enriched purchase %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

func TestAnEventKeyedByAnotherUserIsRefused(t *testing.T) {
	store := keyed.New(keyed.NewMemory(), enrichpurchases.Transformation.StateCodec(), keyed.Options{Inline: true})
	_, err := process(store, msg("u2", pageView("e-1", "u1"), 1))
	if err == nil || !strings.Contains(err.Error(), `event "e-1" is about user "u1" but keyed by "u2"`) {
		t.Fatalf("a page view of u1 keyed by u2: %v, want refused, saying so", err)
	}
	recs, err := process(store, msg("u2", purchase("e-2", "u2", "sku-1"), 2))
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0].Payload), `"page_views_before":0`) {
		t.Fatalf("u2's purchase after the refused page view: %v, %d records; want one with page_views_before 0", err, len(recs))
	}
}
