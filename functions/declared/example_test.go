package declared_test

import (
	"fmt"
	"time"

	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/functions/transform"
)

// A declared view's spec, as the manifest loader builds it from
//
//	from: {input: …, filter: {type: purchase}, key: sku}
//	columns:
//	  - {name: units_1d, type: bigint, aggregate: sum, value: qty, window: 1d}
//	  - {name: revenue_cents_1d, type: bigint, aggregate: sum, value: qty * price_cents, window: 1d}
//
// and the operation it makes of a purchase, at the event's time.
func Example() {
	purchase, _ := declared.NewLiteral("purchase")
	program, err := declared.Compile(declared.Spec{
		View:   "sku_sales_1d",
		Filter: map[string][]declared.Literal{"type": {purchase}},
		Key:    declared.KeySpec{Column: "sku", Type: "text", Field: "sku"},
		Columns: []declared.ColumnSpec{
			{Name: "units_1d", Type: "bigint", Aggregate: declared.Sum, Value: declared.MustParseExpr("qty")},
			{Name: "revenue_cents_1d", Type: "bigint", Aggregate: declared.Sum, Value: declared.MustParseExpr("qty * price_cents")},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 11, 1, 10, 0, 7, 0, time.UTC)
	for _, event := range []string{
		`{"type":"purchase","user":"u42","sku":"sku-7","qty":2,"price_cents":1999}`,
		`{"type":"page_view","user":"u42","url":"/"}`,
		`{"type":"purchase","user":"u42","sku":"sku-7","qty":"two","price_cents":1999}`,
	} {
		recs, err := program.Transformation().Process(transform.Message{Key: "u42", EventTime: at, Payload: []byte(event)})
		switch {
		case err != nil:
			fmt.Println("dead letter:", err)
		case len(recs) == 0:
			fmt.Println("left out")
		default:
			fmt.Printf("%s\n", recs[0].Payload)
		}
	}
	// Output:
	// {"view":"sku_sales_1d","key":{"sku":"sku-7"},"op":"apply","time":"2026-11-01T10:00:07Z","columns":[{"column":"units_1d","merge":"add","value":2},{"column":"revenue_cents_1d","merge":"add","value":3998}]}
	// left out
	// dead letter: decoding event: column units_1d: field qty is a string, want an integer; column revenue_cents_1d: field qty is a string, want an integer
}
