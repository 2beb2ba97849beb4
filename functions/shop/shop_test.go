package shop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/shop/orders"
	"github.com/foldline/foldline/functions/shop/productsales"
	"github.com/foldline/foldline/functions/shop/purchases"
	"github.com/foldline/foldline/functions/shop/skurefunds"
	"github.com/foldline/foldline/functions/shop/useractivity"
	"github.com/foldline/foldline/functions/shop/validate"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/memview"
	"github.com/foldline/foldline/internal/shopfold"
)

const ledger = "persistent://shop/ledger/events-partition-0"

// pipeline runs the shop DAG in memory, in ledger order: validate →
// user-activity, validate → purchases → product-sales, and validate →
// orders → sku-refunds (stateful: its orders' states in memory), applying
// the view operations with the reference merge semantics.
type pipeline struct {
	t        *testing.T
	views    *memview.Views
	rejected []int
	// refunds keeps sku-refunds' states; unknownOrders lists the lines it
	// rejected as refunds of an order with no purchase.
	refunds       *keyed.Store
	unknownOrders []int
}

func newPipeline(t *testing.T) *pipeline {
	return &pipeline{t: t, views: memview.New(),
		refunds: keyed.New(keyed.NewMemory(), skurefunds.Transformation.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited})}
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
					compare(t, n+1, p, fold.Result())
				}
			}
		})
	}
}

func compare(t *testing.T, after int, p *pipeline, want shopfold.Result) {
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
