package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/shopfold"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra/reader"
)

// declaredShopManifests is a copy of the shop's manifests with only what
// the views declared in YAML need: the tenant, the dedup and validate
// stages, and the views user_purchases_7d and sku_units_1d, whose functions
// the loader adds.
func declaredShopManifests(t testing.TB) string {
	t.Helper()
	dir := testenv.ShopManifests(t)
	dropFromShop(t, dir, []string{"user_activity", "product_sales", "sku_refunds", "sku_page_views_before"},
		[]string{"user-activity", "purchases", "product-sales", "orders", "sku-refunds", "enrich-purchases"})
	return dir
}

// TestDeclaredViewsFoldByEventTime deploys the shop's two views declared in
// YAML (no Go of their own) on the real stack, ingests two days of events
// ending now, and compares every user's and sku's windows, read with
// reader.GetAt at the present, with an independent fold by event time
// (shopfold.UserPurchasesAt, SKUUnitsAt). Then a third view is added the
// way a data scientist adds a feature — one YAML file, read by a backfill
// — from the events as dedup passes them on, malformed lines included: its
// windows equal a fold of the lines it keeps, and each line it cannot read
// is in its dead-letter topic with the reason. Averages (aggregate avg, stored as
// a sum and a count) are checked all-time with Get (user_cart_sizes,
// deployed with the shop's two) and over a window with GetAt (the third
// view's), null where no event counts.
func TestDeclaredViewsFoldByEventTime(t *testing.T) {
	dir := declaredShopManifests(t)
	if err := os.WriteFile(filepath.Join(dir, "views", "user_cart_sizes.yaml"), []byte(userCartSizes), 0o644); err != nil {
		t.Fatal(err)
	}
	s := deployShopFrom(t, "declared", dir)

	// Two days of events up to a few minutes ago: the 1-day windows hold
	// about half of them, the 7-day ones all. Tiles older than a window
	// and a hop would be dropped by the sink, and these are not.
	const events = 1500
	span := 48 * time.Hour
	start := time.Now().Add(-span - 5*time.Minute).Truncate(time.Second).UTC()
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: events, Users: 40, SKUs: 15, Seed: 61, Start: start, Interval: span / events, Malformed: 0.05}); err != nil {
		t.Fatalf("generating events: %v", err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	s.ingest(t, lines)

	folder := shopfold.NewDistinctFolder()
	for _, l := range lines {
		_ = folder.Add(l)
	}
	purchases := folder.Purchases()
	users, skus := map[string]bool{}, map[string]bool{}
	for _, p := range purchases {
		users[p.User], skus[p.SKU] = true, true
	}
	if len(purchases) == 0 {
		t.Fatal("the generated events hold no purchase: nothing would be checked")
	}
	up := openView(t, s, "user_purchases_7d")
	su := openView(t, s, "sku_units_1d")
	waitForWindows(t, "user_purchases_7d and sku_units_1d", func(at time.Time) string {
		return compareDeclared(t.Context(), up, su, purchases, at, slices.Sorted(maps.Keys(users)), slices.Sorted(maps.Keys(skus)))
	})
	want := shopfold.UserPurchasesAt(purchases, time.Now())
	var in1d, in7d int64
	for _, r := range want {
		in1d += r.Purchases1d
		in7d += r.Purchases7d
	}
	if in1d == 0 || in1d == in7d {
		t.Errorf("the 1-day windows hold %d of the %d purchases of the 7-day ones: the windows were not told apart", in1d, in7d)
	}
	t.Logf("%d purchases of %d users and %d skus: the declared views equal the fold by event time (%d purchases in the users' 1-day windows)", len(purchases), len(users), len(skus), in1d)

	// The all-time average, read with Get, from the same deduplicated ledger.
	carts, dead := foldCarts(lines)
	sizes := openView(t, s, "user_cart_sizes")
	waitForWindows(t, "user_cart_sizes", func(time.Time) string {
		var out []string
		for _, u := range slices.Sorted(maps.Keys(carts)) {
			want, wantFound := meanQty(carts[u], func(cart) bool { return true })
			row, found, err := sizes.Get(t.Context(), u)
			if err != nil {
				return fmt.Sprintf("reading user_cart_sizes %s: %v", u, err)
			}
			if got, ok := row["cart_qty_avg"].(float64); found != wantFound || ok != wantFound || got != want {
				out = append(out, fmt.Sprintf("user_cart_sizes %s: average %v (found %v), want %v (found %v)", u, row["cart_qty_avg"], found, want, wantFound))
			}
		}
		return strings.Join(out, "\n")
	})

	// One more file, and a backfill.
	if err := os.WriteFile(filepath.Join(dir, "views", "user_carts_1d.yaml"), []byte(userCarts), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := backfill.Run(t.Context(), s.backfillOptions("user_carts_1d", dir), false)
	if err != nil {
		t.Fatalf("backfilling user_carts_1d: %v", err)
	}
	if res.Table != "user_carts_1d_v1" || res.State != backfill.StateSwitched {
		t.Fatalf("backfill of user_carts_1d: %+v, want user_carts_1d_v1 switched", res)
	}
	// Deploy then leaves the backfill's copy of the path alone.
	plan, err := deploy.MakePlan(t.Context(), s.opts)
	if err != nil {
		t.Fatalf("planning after the backfill: %v", err)
	}
	if pending := plan.Pending(); len(pending) > 0 {
		t.Errorf("deploy after the backfill of a new declared view would change %+v", pending)
	}
	uc := openView(t, s, "user_carts_1d")
	waitForWindows(t, "user_carts_1d", func(at time.Time) string {
		var out []string
		for _, u := range slices.Sorted(maps.Keys(carts)) {
			var want int64
			for _, c := range carts[u] {
				if shopfold.InWindow(c.at, at, 24*time.Hour) {
					want += c.qty
				}
			}
			row, found, err := uc.GetAt(t.Context(), at, u)
			if err != nil {
				return fmt.Sprintf("reading user_carts_1d %s: %v", u, err)
			}
			if got := bigint(row, "cart_units_1d"); got != want || (want != 0 && !found) {
				out = append(out, fmt.Sprintf("user_carts_1d %s: %d (found %v), want %d", u, got, found, want))
			}
			wantAvg, inWindow := meanQty(carts[u], func(c cart) bool { return shopfold.InWindow(c.at, at, 24*time.Hour) })
			if got, ok := row["cart_qty_avg_1d"].(float64); ok != inWindow || got != wantAvg {
				out = append(out, fmt.Sprintf("user_carts_1d %s: average %v, want %v (null: %v)", u, row["cart_qty_avg_1d"], wantAvg, !inWindow))
			}
		}
		return strings.Join(out, "\n")
	})
	if len(dead) == 0 {
		t.Fatal("no line is one user_carts_1d cannot read: nothing checks its dead letters")
	}
	dlq := "persistent://" + s.tenant + "/" + pipelineNS + "/user_carts_1d-declared-dlq" + manifest.ForkSuffix("user_carts_1d_v1")
	for i, msg := range s.deadLetters(t, dlq, len(dead), time.Minute) {
		reason := msg.Properties()[envelope.PropDeadLetterReason]
		if !bytes.Equal(msg.Payload(), dead[i].line) || !strings.Contains(reason, dead[i].reason) {
			t.Errorf("dead letter %d: %q, reason %q; want %q, a reason with %q", i, msg.Payload(), reason, dead[i].line, dead[i].reason)
		}
	}
	t.Logf("user_carts_1d, added by one file and a backfill, equals the fold of %d users' carts (units and average size over a day, user_cart_sizes the all-time average); %d lines dead-lettered, e.g. %q: %s",
		len(carts), len(dead), dead[0].line, dead[0].reason)
}

// meanQty is the mean quantity of the carts that count, false without
// any: an average over no event is null.
func meanQty(carts []cart, counts func(cart) bool) (float64, bool) {
	var sum float64
	n := 0
	for _, c := range carts {
		if counts(c) {
			sum += float64(c.qty)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// userCarts is a view declared straight from the ledger's events as the
// event-id deduplication passes them on (the one reader of a ledger with
// event ids; malformed lines pass too), which a backfill adds.
const userCarts = `kind: View
name: user_carts_1d
description: Units each user put in carts over the last day, and their average quantity, from the deduplicated ledger.
hop: 1h
from:
  input: persistent://shop/pipeline/distinct
  filter: {type: add_to_cart}
  key: user
  sample: samples/shop-events.jsonl
key:
  - {name: user, type: text}
columns:
  - {name: cart_units_1d, type: bigint, aggregate: sum, value: qty, window: 1d}
  - {name: cart_qty_avg_1d, type: double, aggregate: avg, value: qty, window: 1d}
sink:
  input: persistent://shop/pipeline/user_carts_1d-ops
`

// userCartSizes is an all-time view declared from the deduplicated ledger:
// the average quantity each user puts in a cart.
const userCartSizes = `kind: View
name: user_cart_sizes
description: The average quantity each user put in a cart, over all time, from the deduplicated ledger.
from:
  input: persistent://shop/pipeline/distinct
  filter: {type: add_to_cart}
  key: user
  sample: samples/shop-events.jsonl
key:
  - {name: user, type: text}
columns:
  - {name: cart_qty_avg, type: double, aggregate: avg, value: qty}
sink:
  input: persistent://shop/pipeline/user_cart_sizes-ops
`

// cart is one add_to_cart event that user_carts_1d folds.
type cart struct {
	at  time.Time
	qty int64
}

// deadLine is a ledger line user_carts_1d cannot read, and a part of the
// reason it must give.
type deadLine struct {
	line   []byte
	reason string
}

// foldCarts reads the ledger as the rules of a declared view say, written
// here from them: a line that is not a JSON object is dead; an object
// whose type is not the string add_to_cart is left out; a kept one needs
// a non-empty string user, an integer qty and an event time (ingest takes
// it from an RFC 3339 time field), else it is dead.
func foldCarts(lines [][]byte) (map[string][]cart, []deadLine) {
	carts := map[string][]cart{}
	var dead []deadLine
	for _, line := range lines {
		var obj map[string]json.RawMessage
		if json.Unmarshal(line, &obj) != nil || obj == nil {
			dead = append(dead, deadLine{line, "not a JSON object"})
			continue
		}
		var typ string
		if json.Unmarshal(obj["type"], &typ) != nil || typ != "add_to_cart" {
			continue
		}
		var user string
		if json.Unmarshal(obj["user"], &user) != nil || user == "" {
			dead = append(dead, deadLine{line, "key user: field user"})
			continue
		}
		qty, err := strconv.ParseInt(string(obj["qty"]), 10, 64)
		if err != nil {
			dead = append(dead, deadLine{line, "column cart_units_1d: field qty"})
			continue
		}
		var text string
		at, err := time.Time{}, json.Unmarshal(obj["time"], &text)
		if err == nil {
			at, err = time.Parse(time.RFC3339Nano, text)
		}
		if err != nil {
			dead = append(dead, deadLine{line, "no event time"})
			continue
		}
		carts[user] = append(carts[user], cart{at: at, qty: qty})
	}
	return carts, dead
}

// openView opens a view of s with the reader applications use.
func openView(t *testing.T, s *shop, view string) *reader.View {
	t.Helper()
	v, err := reader.Open(t.Context(), s.session, s.keyspace, view, reader.Options{})
	if err != nil {
		t.Fatalf("opening %s: %v", view, err)
	}
	return v
}

// waitForWindows polls compare, as of the present each time (the present
// moves on while the sinks catch up), until it reports no difference.
func waitForWindows(t *testing.T, what string, compare func(at time.Time) string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		at := time.Now()
		diff := compare(at)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s differ from the fold by event time as of %s:\n%s", what, at.Format(time.RFC3339), diff)
		}
		time.Sleep(2 * time.Second)
	}
}

// compareDeclared reads every user's and sku's row as of at and describes
// how they differ from the fold, "" when they do not.
func compareDeclared(ctx context.Context, up, su *reader.View, purchases []shopfold.Purchase, at time.Time, users, skus []string) string {
	var out []string
	wantUsers := shopfold.UserPurchasesAt(purchases, at)
	for _, u := range users {
		row, found, err := up.GetAt(ctx, at, u)
		if err != nil {
			return fmt.Sprintf("reading user_purchases_7d %s: %v", u, err)
		}
		got := shopfold.UserPurchasesRow{Purchases7d: bigint(row, "purchases_7d"), SpentCents7d: bigint(row, "spent_cents_7d"), Purchases1d: bigint(row, "purchases_1d")}
		want, wantFound := wantUsers[u]
		if found != wantFound || got != want {
			out = append(out, fmt.Sprintf("user_purchases_7d %s: %+v (found %v), want %+v (found %v)", u, got, found, want, wantFound))
		}
	}
	wantSKUs := shopfold.SKUUnitsAt(purchases, at)
	for _, sku := range skus {
		row, found, err := su.GetAt(ctx, at, sku)
		if err != nil {
			return fmt.Sprintf("reading sku_units_1d %s: %v", sku, err)
		}
		got := shopfold.SKUUnitsRow{Units1d: bigint(row, "units_1d")}
		want, wantFound := wantSKUs[sku]
		if found != wantFound || got != want {
			out = append(out, fmt.Sprintf("sku_units_1d %s: %+v (found %v), want %+v (found %v)", sku, got, found, want, wantFound))
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("… and %d more", len(out)-8))
	}
	return strings.Join(out, "\n")
}

// bigint is a bigint column of a row read with GetAt, 0 when absent.
func bigint(row reader.Row, column string) int64 {
	n, _ := row[column].(int64)
	return n
}
