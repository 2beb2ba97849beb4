// Package validate is the shop pipeline's first stage: ledger → valid. It
// parses each ledger event strictly (package event) and passes it on in
// canonical JSON, keyed by user, at the event's own time. An event with bad
// JSON, an unknown type, a missing or wrongly typed field, or a negative
// quantity or price is rejected with a reason that names the field, which the
// runtime puts on the dead-letter message.
package validate

import (
	"github.com/foldline/foldline/functions/shop/event"
	"github.com/foldline/foldline/functions/transform"
)

// Transformation is the validate stage.
var Transformation = transform.New(event.Parse, validate)

func validate(in transform.Input[event.Event]) ([]transform.Output, error) {
	e := in.Event
	return []transform.Output{transform.EmitJSON(e.User, e).At(e.Time)}, nil
}
