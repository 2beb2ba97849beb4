package skurefunds_test

import (
	"context"
	"errors"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/shop/skurefunds"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

func msg(order, payload string, entry int64) transform.Message {
	return transform.Message{Key: order, Payload: []byte(payload), Origin: envelope.Origin{
		Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 5, Entry: entry},
	}}
}

const (
	purchase = `{"id":"e-1","type":"purchase","user":"u1","time":"2026-11-01T10:00:00Z","order":"o-1","sku":"sku-7","qty":2,"price_cents":500}`
	refund   = `{"id":"e-2","type":"refund","user":"u1","time":"2026-11-01T11:00:00Z","order":"o-1","amount_cents":300}`
	other    = `{"id":"e-3","type":"refund","user":"u2","time":"2026-11-01T12:00:00Z","order":"o-9","amount_cents":100}`
)

func TestContract(t *testing.T) {
	transformtest.RunStateful(t, skurefunds.Transformation,
		msg("o-1", purchase, 1),
		msg("o-1", refund, 2),
		msg("o-1", refund, 3),
	)
}

func TestJoin(t *testing.T) {
	store := keyed.New(keyed.NewMemory(), skurefunds.Transformation.StateCodec(), keyed.Options{Inline: true})
	process := func(m transform.Message) ([]transform.Record, error) {
		recs, txn, err := skurefunds.Transformation.ProcessKeyed(context.Background(), store, m)
		if txn != nil {
			txn.Settle(func(error) {})
		}
		return recs, err
	}
	if recs, err := process(msg("o-1", purchase, 1)); err != nil || len(recs) != 0 {
		t.Fatalf("a purchase: %v, %d records; want nothing", err, len(recs))
	}
	recs, err := process(msg("o-1", refund, 2))
	if err != nil || len(recs) != 1 {
		t.Fatalf("a refund of a known order: %v, %d records", err, len(recs))
	}
	op, err := envelope.DecodeViewOp(recs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	if op.View != skurefunds.View || string(op.Key[skurefunds.ColSKU]) != `"sku-7"` || len(op.Columns) != 2 || string(op.Columns[1].Value) != "300" {
		t.Errorf("refund operation %+v, want sku-7 refunds +1, refunded_cents +300", op)
	}
	if _, err := process(msg("o-9", other, 3)); !errors.Is(err, skurefunds.ErrUnknownOrder) {
		t.Errorf("a refund of an order with no purchase: %v, want ErrUnknownOrder", err)
	}
	if _, err := process(msg("o-9", other, 3)); err != nil {
		t.Errorf("the same refund delivered again: %v, want nothing (it was judged before)", err)
	}
}
