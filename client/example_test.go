package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/foldline/foldline/client"
)

// An application publishes its events as they happen. After a restart it
// does not know which of the last ones the ledger got, and publishes them
// again: every view counts an event once per id, so that is safe. An event
// without an id is refused, since nothing could tell its copies apart.
func Example() {
	ctx := context.Background()
	producer, err := client.New(client.Options{Client: pulsarClient, Tenant: tenant})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close()

	events := []string{
		`{"id":"ord-1001","type":"purchase","user":"u7","time":"2026-12-01T10:00:00Z","order":"ord-1001","sku":"sku-3","qty":1,"price_cents":2500}`,
		`{"id":"ref-1001","type":"refund","user":"u7","time":"2026-12-01T11:00:00Z","order":"ord-1001","amount_cents":2500}`,
	}
	publish := func(what string) {
		for _, e := range events {
			if err := producer.Publish(ctx, []byte(e)); err != nil {
				// Publishing the same event again later is safe too.
				fmt.Println("not published yet:", err)
				continue
			}
		}
		fmt.Println(what)
	}
	publish("published 2 events")
	// … the application restarts, and publishes what it is not sure of.
	publish("published them again")

	err = producer.Publish(ctx, []byte(`{"type":"page_view","user":"u7","time":"2026-12-01T12:00:00Z","url":"/"}`))
	fmt.Println(errors.Is(err, client.ErrNoID))
	// Output:
	// published 2 events
	// published them again
	// true
}
