// Package transform is the authoring API for Foldline transformations.
//
// A transformation is a pure Go function over a typed event:
//
//	func(in transform.Input[E]) ([]transform.Output, error)
//
// It gets the event's key, event time and decoded value, and returns zero or
// more outputs: records for the next topic (Emit) or operations on a row of a
// view (Row(...).Apply(Add(...), Max(...), ...) or Row(...).Delete()). It
// never sees Pulsar, a clock, randomness or I/O, which is what makes replay
// and backfill exact; the origin position of the ledger event travels with
// every output without the author touching it.
//
// New binds a decoder and such a function into a Transformation, whose
// Process method is the whole pure pipeline step: payload in, encoded
// records out. ProcessOps is the same step for a caller that folds the view
// operations in its own process (the floor benchmark of admin/e2e): each
// operation is handed over as it was built, not encoded only to be decoded
// again, and the contract suite checks it against Process. The subpackage run hands a Transformation to the Pulsar
// function runtime (a transformation's main is one line), transformtest is
// the contract suite every transformation passes from its test, and memview
// applies view operations in memory with the reference merge semantics.
//
// Every error Process returns is about its input, since a transformation does
// no I/O: retrying cannot help, so the runtime sends the input to the
// dead-letter topic with the error text as the reason. Decoding errors also
// match ErrMalformed.
package transform
