// Package fanout is a two-stage test pipeline in which every stage fans out:
// each input yields two outputs, and all four outputs of one ledger event
// land on the same row of one view. It exists to push the exactly-once
// machinery through real stages (admin/e2e's TestFanOut): the outputs of one
// input carry the same origin event, so only their paths (envelope
// Position.Path, "/i" per fanning stage) tell the second add on a row from a
// redelivery of the first.
//
//	ledger ──► split ──► parts ──► tally ──► view totals
//
// The stages:
//
//   - split: each ledger event {"id","key","time","amount"} becomes two
//     records on the same key, of amount a and 100·a (paths /0 and /1).
//   - tally: each record becomes two operations on the row of its key,
//     adding its amount and ten times its amount to total, and 1 to ops
//     (paths /0/0, /0/1, /1/0, /1/1 of the ledger event).
//
// So every ledger event of amount a adds exactly 1111·a to its key's total
// and 4 to its ops: each output that is lost (or applied twice) shows in a
// different decimal digit of the per-event contribution.
package fanout

import (
	"errors"
	"time"

	"github.com/foldline/foldline/functions/transform"
)

// The view and its columns.
const (
	View     = "totals"
	ColKey   = "key"
	ColTotal = "total"
	ColOps   = "ops"
)

// Contribution is what one ledger event of amount a adds to its row's total,
// over the four outputs of the two stages: a + 10a + 100a + 1000a.
const Contribution = 1111

// OpsPerEvent is what one ledger event adds to its row's ops.
const OpsPerEvent = 4

// Event is both a ledger event and a record on the parts topic.
type Event struct {
	ID     string    `json:"id"`
	Key    string    `json:"key"`
	Time   time.Time `json:"time"`
	Amount int64     `json:"amount"`
}

// Validate refuses events without a key or time, or with an amount that is
// not positive.
func (e *Event) Validate() error {
	switch {
	case e.Key == "":
		return errors.New("key: missing")
	case e.Time.IsZero():
		return errors.New("time: missing")
	case e.Amount <= 0:
		return errors.New("amount: want more than 0")
	}
	return nil
}

// Split is the split stage: ledger → parts.
var Split = transform.New(transform.JSON[Event], split)

// Tally is the tally stage: parts → view totals.
var Tally = transform.New(transform.JSON[Event], tally)

func split(in transform.Input[Event]) ([]transform.Output, error) {
	e := in.Event
	big := e
	big.Amount *= 100
	return []transform.Output{
		transform.Emit(e.Key, e).At(e.Time),
		transform.Emit(e.Key, big).At(e.Time),
	}, nil
}

func tally(in transform.Input[Event]) ([]transform.Output, error) {
	e := in.Event
	row := transform.Row(View, ColKey, e.Key)
	return []transform.Output{
		row.Apply(transform.Add(ColTotal, e.Amount), transform.Add(ColOps, 1)).At(e.Time),
		row.Apply(transform.Add(ColTotal, 10*e.Amount), transform.Add(ColOps, 1)).At(e.Time),
	}, nil
}
