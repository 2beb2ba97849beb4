package shop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/shop/enrichpurchases"
	"github.com/foldline/foldline/functions/shop/orders"
	"github.com/foldline/foldline/functions/shop/productsales"
	"github.com/foldline/foldline/functions/shop/purchases"
	"github.com/foldline/foldline/functions/shop/skurefunds"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/memview"
	"github.com/foldline/foldline/internal/shopfold"
	"github.com/foldline/foldline/internal/testenv"
)

const ledger = "persistent://shop/ledger/events-partition-0"

// pipeline runs the shop DAG in memory, in ledger order: validate →
// user-activity, validate → purchases → product-sales, validate →
// orders → sku-refunds (stateful: its orders' states in memory), and
// validate → enrich-purchases (stateful: its users' page views) → the
// declared view sku_page_views_before (its program compiled from the
// shipped manifest), applying the view operations with the reference
// merge semantics.
type pipeline struct {
	t        *testing.T
	views    *memview.Views
	rejected []int
	// refunds keeps sku-refunds' states; unknownOrders lists the lines it
	// rejected as refunds of an order with no purchase.
	refunds       *keyed.Store
	unknownOrders []int
	// users keeps enrich-purchases' states; enriched lists its outputs.
	users       *keyed.Store
	enriched    []enrichpurchases.Purchase
	pageViewsBy *declared.Program
}

func newPipeline(t *testing.T) *pipeline {
	return &pipeline{t: t, views: memview.New(),
		refunds:     keyed.New(keyed.NewMemory(), skurefunds.Transformation.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited}),
		users:       keyed.New(keyed.NewMemory(), enrichpurchases.Transformation.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited}),
		pageViewsBy: declaredProgram(t, "sku_page_views_before"),
	}
}

// declaredProgram compiles the declared view of the shipped shop manifests
// (manifests/) as the loader hands it to its function.
func declaredProgram(t *testing.T, view string) *declared.Program {
	t.Helper()
	set, err := manifest.Load(filepath.Join(testenv.RepoRoot(), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range set.Functions {
		if f.Declared != nil && f.Declared.Name == view {
			program, err := declared.FromUserConfig(f.Config.UserConfig)
			if err != nil {
				t.Fatalf("compiling declared view %s: %v", view, err)
			}
			return program
		}
	}
	t.Fatalf("the shop manifests declare no view %s", view)
	return nil
}

// enrich runs enrich-purchases over a valid event, returning its records.
func enrich(store *keyed.Store, in transform.Record) ([]transform.Record, error) {
	recs, txn, err := enrichpurchases.Transformation.ProcessKeyed(context.Background(), store, next(in))
	if txn != nil {
		txn.Settle(func(error) {})
	}
	return recs, err
}

func (p *pipeline) feed(n int, line []byte) {
	p.t.Helper()
	origin := envelope.Origin{Topic: ledger, Position: envelope.Position{Ledger: 1, Entry: int64(n)}}
	valid, err := validate.Transformation.Process(transform.Message{Payload: line, Origin: origin})
	if err != nil {
		if !errors.Is(err, transform.ErrMalformed) {
			p.t.Fatalf("line %d: validate: %v", n+1, err)
		}
		p.rejected = append(p.rejected, n)
		return
	}
	for _, v := range valid {
		p.toView(n, useractivity.Transformation, v, origin)
		bought, err := purchases.Transformation.Process(next(v))
		if err != nil {
			p.t.Fatalf("line %d: purchases: %v", n+1, err)
		}
		for _, b := range bought {
			p.toView(n, productsales.Transformation, b, origin)
		}
		ordered, err := orders.Transformation.Process(next(v))
		if err != nil {
			p.t.Fatalf("line %d: orders: %v", n+1, err)
		}
		for _, o := range ordered {
			recs, txn, err := skurefunds.Transformation.ProcessKeyed(context.Background(), p.refunds, next(o))
			if txn != nil {
				txn.Settle(func(error) {})
			}
			if errors.Is(err, skurefunds.ErrUnknownOrder) {
				p.unknownOrders = append(p.unknownOrders, n)
				continue
			}
			if err != nil {
				p.t.Fatalf("line %d: sku-refunds: %v", n+1, err)
			}
			p.apply(n, recs, origin)
		}
		enriched, err := enrich(p.users, v)
		if err != nil {
			p.t.Fatalf("line %d: enrich-purchases: %v", n+1, err)
		}
		for _, e := range enriched {
			var purchase enrichpurchases.Purchase
			if err := json.Unmarshal(e.Payload, &purchase); err != nil {
				p.t.Fatalf("line %d: enriched purchase %s: %v", n+1, e.Payload, err)
			}
			p.enriched = append(p.enriched, purchase)
			p.toView(n, p.pageViewsBy.Transformation(), e, origin)
		}
	}
}

func next(r transform.Record) transform.Message {
	return transform.Message{Key: r.Key, EventTime: r.EventTime, Payload: r.Payload, Origin: r.Origin}
}

func (p *pipeline) toView(n int, stage transform.Processor, in transform.Record, origin envelope.Origin) {
	p.t.Helper()
	ops, err := stage.Process(next(in))
	if err != nil {
		p.t.Fatalf("line %d: %v", n+1, err)
	}
	p.apply(n, ops, origin)
}

// apply applies view operations of line n, whose origin they must keep.
func (p *pipeline) apply(n int, ops []transform.Record, origin envelope.Origin) {
	p.t.Helper()
	for _, r := range ops {
		if r.Origin != origin {
			p.t.Fatalf("line %d: view operation has origin %+v, want %+v", n+1, r.Origin, origin)
		}
		op, err := envelope.DecodeViewOp(r.Payload)
		if err != nil {
			p.t.Fatalf("line %d: %v", n+1, err)
		}
		if err := p.views.Apply(op); err != nil {
			p.t.Fatalf("line %d: %v", n+1, err)
		}
	}
}

func TestPipelineEqualsIndependentFold(t *testing.T) {
	tests := []struct {
		name string
		opts gen.Options
	}{
		{name: "few users, many malformed", opts: gen.Options{Events: 3000, Users: 20, SKUs: 5, Seed: 1, Malformed: 0.1}},
		{name: "skewed stream", opts: gen.Options{Events: 15000, Users: 1500, SKUs: 150, Seed: 7, Malformed: 0.01}},
		{name: "wide jitter", opts: gen.Options{Events: 5000, Users: 100, SKUs: 20, Seed: 3, Malformed: 0.02, Jitter: time.Hour}},
		{name: "only malformed", opts: gen.Options{Events: 500, Users: 10, SKUs: 3, Seed: 5, Malformed: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if _, err := gen.Generate(&buf, tc.opts); err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
			p := newPipeline(t)
			fold := shopfold.NewFolder()
			// The views must equal the fold after any number of events:
			// compare at a few points along the stream, not only at its end.
			checkpoints := []int{len(lines) / 7, len(lines) / 2, len(lines)}
			for n, line := range lines {
				p.feed(n, line)
				_ = fold.Add(line) // rejections are listed in the result
				if slices.Contains(checkpoints, n+1) {
					compare(t, n+1, p, fold.Result(), fold.Purchases())
				}
			}
		})
	}
}

func compare(t *testing.T, after int, p *pipeline, want shopfold.Result, purchases []shopfold.Purchase) {
	t.Helper()
	if !slices.Equal(p.rejected, want.Rejected) {
		t.Errorf("after %d lines: validate rejected %d lines, the fold %d; first difference: %v",
			after, len(p.rejected), len(want.Rejected), firstDifference(p.rejected, want.Rejected))
	}
	users := userActivity(t, p.views)
	products := productSales(t, p.views)
	diff(t, fmt.Sprintf("after %d lines: user_activity", after), users, want.UserActivity)
	diff(t, fmt.Sprintf("after %d lines: product_sales", after), products, want.ProductSales)
	diff(t, fmt.Sprintf("after %d lines: sku_refunds", after), skuRefunds(t, p.views), want.SkuRefunds)
	diff(t, fmt.Sprintf("after %d lines: sku_page_views_before", after), skuPageViewsBefore(t, p.views), want.SkuPageViewsBefore)
	if len(p.enriched) != len(purchases) {
		t.Errorf("after %d lines: %d enriched purchases, the fold %d purchases", after, len(p.enriched), len(purchases))
	}
	for i := range min(len(p.enriched), len(purchases)) {
		e, w := p.enriched[i], purchases[i]
		if e.User != w.User || e.SKU != w.SKU || e.Qty != w.Qty || e.PriceCents != w.PriceCents || !e.Time.Equal(w.Time) || e.PageViewsBefore != w.PageViewsBefore {
			t.Errorf("after %d lines: enriched purchase %d = %+v, the fold's purchase %+v", after, i, e, w)
			break
		}
	}
	if !slices.Equal(p.unknownOrders, want.UnknownOrders) {
		t.Errorf("after %d lines: sku-refunds rejected lines %v as refunds of unknown orders, the fold %v", after, p.unknownOrders, want.UnknownOrders)
	}
	if len(want.UserActivity) == 0 && want.Accepted > 0 {
		t.Errorf("after %d lines: the fold has no rows although %d events were valid", after, want.Accepted)
	}
}

func firstDifference(a, b []int) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d vs line %d", a[i]+1, b[i]+1)
		}
	}
	return "one list is a prefix of the other"
}

func diff[R any](t *testing.T, what string, got, want map[string]R) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	shown := 0
	for _, k := range unionKeys(got, want) {
		g, w := got[k], want[k]
		if !reflect.DeepEqual(g, w) && shown < 5 {
			t.Errorf("%s[%s] = %+v, want %+v", what, k, g, w)
			shown++
		}
	}
	t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
}

func unionKeys[R any](a, b map[string]R) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// userActivity reads view user_activity into the fold's row type; a column
// no operation touched reads as its zero value, as the fold documents.
func userActivity(t *testing.T, views *memview.Views) map[string]shopfold.UserActivityRow {
	t.Helper()
	out := map[string]shopfold.UserActivityRow{}
	for _, r := range views.Rows(useractivity.View) {
		c := columns{t: t, row: r}
		out[c.key(useractivity.ColUser)] = shopfold.UserActivityRow{
			PageViews:  c.int(useractivity.ColPageViews),
			CartUnits:  c.int(useractivity.ColCartUnits),
			Purchases:  c.int(useractivity.ColPurchases),
			SpentCents: c.int(useractivity.ColSpentCents),
			LastSeen:   c.time(useractivity.ColLastSeen),
			LastURL:    c.text(useractivity.ColLastURL),
		}
	}
	return out
}

func skuRefunds(t *testing.T, views *memview.Views) map[string]shopfold.SkuRefundsRow {
	t.Helper()
	out := map[string]shopfold.SkuRefundsRow{}
	for _, r := range views.Rows(skurefunds.View) {
		c := columns{t: t, row: r}
		out[c.key(skurefunds.ColSKU)] = shopfold.SkuRefundsRow{
			Refunds:       c.int(skurefunds.ColRefunds),
			RefundedCents: c.int(skurefunds.ColRefundedCents),
		}
	}
	return out
}

func skuPageViewsBefore(t *testing.T, views *memview.Views) map[string]shopfold.SkuPageViewsBeforeRow {
	t.Helper()
	out := map[string]shopfold.SkuPageViewsBeforeRow{}
	for _, r := range views.Rows("sku_page_views_before") {
		c := columns{t: t, row: r}
		out[c.key("sku")] = shopfold.SkuPageViewsBeforeRow{Purchases: c.int("purchases"), PageViewsBefore: c.int("page_views_before")}
	}
	return out
}

func productSales(t *testing.T, views *memview.Views) map[string]shopfold.ProductSalesRow {
	t.Helper()
	out := map[string]shopfold.ProductSalesRow{}
	for _, r := range views.Rows(productsales.View) {
		c := columns{t: t, row: r}
		out[c.key(productsales.ColSKU)] = shopfold.ProductSalesRow{
			Units:        c.int(productsales.ColUnits),
			RevenueCents: c.int(productsales.ColRevenueCents),
			Orders:       c.int(productsales.ColOrders),
		}
	}
	return out
}

// columns reads typed values out of a memview row, failing on a wrong type.
type columns struct {
	t   *testing.T
	row memview.Row
}

func (c columns) key(col string) string {
	s, ok := c.row.Key[col].(string)
	if !ok {
		c.t.Fatalf("key column %s = %#v, want a string", col, c.row.Key[col])
	}
	return s
}

func (c columns) int(col string) int64 {
	v, has := c.row.Columns[col]
	n, ok := v.(int64)
	if has && !ok {
		c.t.Fatalf("column %s = %#v, want a whole number", col, v)
	}
	return n
}

func (c columns) text(col string) string {
	v, has := c.row.Columns[col]
	s, ok := v.(string)
	if has && !ok {
		c.t.Fatalf("column %s = %#v, want text", col, v)
	}
	return s
}

func (c columns) time(col string) time.Time {
	s := c.text(col)
	if s == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.t.Fatalf("column %s = %q: %v", col, s, err)
	}
	return at.UTC()
}

var update = flag.Bool("update", false, "rewrite manifests/samples/enriched-purchases.jsonl from the stage's output")

// TestEnrichedSampleIsTheStagesOutput checks that the sample events of the
// declared view sku_page_views_before, which lint reads its fields from,
// are what enrich-purchases makes of the shop's sample events (go test
// -run TestEnrichedSample -update rewrites them; copy them to the frozen
// manifests in internal/testenv/testdata too).
func TestEnrichedSampleIsTheStagesOutput(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "manifests", "samples")
	events, err := os.ReadFile(filepath.Join(dir, "shop-events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	store := keyed.New(keyed.NewMemory(), enrichpurchases.Transformation.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited})
	var out bytes.Buffer
	for n, line := range bytes.Split(bytes.TrimSuffix(events, []byte("\n")), []byte("\n")) {
		origin := envelope.Origin{Topic: ledger, Position: envelope.Position{Ledger: 1, Entry: int64(n)}}
		valid, err := validate.Transformation.Process(transform.Message{Payload: line, Origin: origin})
		if err != nil {
			continue // the view's sample holds what reaches enrich-purchases
		}
		for _, v := range valid {
			recs, err := enrich(store, v)
			if err != nil {
				t.Fatalf("line %d: enrich-purchases: %v", n+1, err)
			}
			for _, r := range recs {
				out.Write(r.Payload)
				out.WriteByte('\n')
			}
		}
	}
	path := filepath.Join(dir, "enriched-purchases.jsonl")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sample, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sample, out.Bytes()) {
		t.Errorf("%s is not what enrich-purchases makes of shop-events.jsonl: run go test ./functions/shop -run TestEnrichedSample -update", path)
	}
	if out.Len() == 0 {
		t.Error("the shop's sample events hold no purchase")
	}
}
