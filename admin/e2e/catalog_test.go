package e2e

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/views"
)

// TestViewCatalog: views lists each view with its catalog and columns,
// --search finds views by their texts, and describe shows one view's
// columns, versions, freshness and lineage back to the ledger.
func TestViewCatalog(t *testing.T) {
	s := deployShop(t, "catalog")
	s.ingest(t, generate(t, 300, 41))
	s.waitForFold(t, 3*time.Minute)
	opts := views.Options{Command: s.opts.Command}

	list, err := views.List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 {
		t.Fatalf("views: %+v, want the shop's 6", list)
	}
	for _, v := range list {
		if v.Description == "" || v.Owner == "" || len(v.Key) != 1 || len(v.Columns) == 0 || v.Columns[0].Type != "bigint" || v.Columns[0].Description == "" {
			t.Errorf("view %s lacks its catalog: %+v", v.View, v.Catalog)
		}
	}
	for word, want := range map[string][]string{
		"MERCHANDISING":     {"product_sales", "sku_page_views_before", "sku_refunds", "sku_units_1d"}, // owner, any case
		"churn":             {"user_activity", "user_purchases_7d"},                                    // description
		"last_url":          {"user_activity"},                                                         // a column
		"page_views_before": {"sku_page_views_before"},                                                 // a column
		"windowed":          {"sku_units_1d", "user_purchases_7d"},                                     // a tag
		"cents":             {"product_sales", "sku_refunds", "user_activity", "user_purchases_7d"},
		"no-such-thing":     nil,
	} {
		search := opts
		search.Search = word
		found, err := views.List(t.Context(), search)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range found {
			names = append(names, v.View)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("views --search %s: %v, want %v", word, names, want)
		}
	}

	d, err := views.Describe(t.Context(), opts, "product_sales")
	if err != nil {
		t.Fatal(err)
	}
	if d.ActiveTable != "product_sales_v1" || len(d.Versions) != 1 || d.Rows != int64(len(s.expected().ProductSales)) || d.LastApplied.IsZero() {
		t.Errorf("describe: table %s, versions %v, rows %d (want %d), last applied %v", d.ActiveTable, d.Versions, d.Rows, len(s.expected().ProductSales), d.LastApplied)
	}
	// product_sales ← product-sales ← purchases ← validate ← dedup ← the ledger.
	var path []string
	for step := d.Lineage; ; step = step.Upstream[0] {
		path = append(path, step.Stage)
		if len(step.Upstream) == 0 {
			if len(step.Ledger) != 1 || !strings.HasSuffix(step.Ledger[0], "/ledger/events") {
				t.Errorf("the lineage ends at %s, which reads %v, not the ledger", step.Stage, step.Inputs)
			}
			break
		}
	}
	if want := []string{"product_sales_v1-sink", "product-sales", "purchases", "validate", "dedup"}; !slices.Equal(path, want) {
		t.Errorf("lineage %v, want %v", path, want)
	}
	var out bytes.Buffer
	d.Write(&out, time.Now())
	for _, want := range []string{"owner: merchandising@shop.example", "revenue_cents  bigint  add", "lineage (from the manifests)", "(the ledger)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("foldline views describe product_sales:\n%s", out.String())
	if _, err := views.Describe(t.Context(), opts, "nope"); err == nil {
		t.Error("describe of an unknown view succeeded")
	}
}
