package transform_test

import (
	"fmt"
	"time"

	"github.com/foldline/foldline/functions/transform"
)

// PageView is the typed event of the examples.
type PageView struct {
	User string `json:"user"`
	URL  string `json:"url"`
}

// Validate rejects a page view without a user; transform.JSON calls it.
func (p *PageView) Validate() error {
	if p.User == "" {
		return fmt.Errorf("user: missing")
	}
	return nil
}

// countViews folds page views into a per-user row of view page_stats.
var countViews = transform.New(transform.JSON[PageView], func(in transform.Input[PageView]) ([]transform.Output, error) {
	row := transform.Row("page_stats", "user", in.Event.User)
	return []transform.Output{row.Apply(
		transform.Add("views", 1),
		transform.Max("last_seen", in.EventTime),
		transform.Set("last_url", in.Event.URL),
	)}, nil
})

// A transformation is a pure function: its test calls it directly, with no
// Pulsar anywhere.
func ExampleNew() {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	recs, err := countViews.Process(transform.Message{
		Key:       "u42",
		EventTime: at,
		Payload:   []byte(`{"user":"u42","url":"/p/sku-7"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		fmt.Printf("key %s: %s\n", r.Key, r.Payload)
	}

	_, err = countViews.Process(transform.Message{Key: "u42", Payload: []byte(`{"url":"/"}`)})
	fmt.Println(err)
	// Output:
	// key u42: {"view":"page_stats","key":{"user":"u42"},"op":"apply","time":"2026-11-01T10:00:00Z","columns":[{"column":"views","merge":"add","value":1},{"column":"last_seen","merge":"max","value":"2026-11-01T10:00:00Z"},{"column":"last_url","merge":"set","value":"/p/sku-7"}]}
	// decoding event: user: missing
}

// Outputs print readably, which keeps example and table tests short.
func ExampleOutput_String() {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	fmt.Println(transform.Emit("sku-7", map[string]int{"qty": 2}).At(at))
	fmt.Println(transform.Row("product_sales", "sku", "sku-7").Apply(transform.Add("units", 2), transform.Add("orders", 1)))
	fmt.Println(transform.Row("carts", "user", "u42").And("sku", "sku-7").Delete())
	// Output:
	// record "sku-7" {"qty":2} at 2026-11-01T10:00:00Z
	// product_sales{sku="sku-7"} apply add units 2 add orders 1
	// carts{sku="sku-7",user="u42"} delete
}
