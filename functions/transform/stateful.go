package transform

import (
	"context"
	"errors"
	"fmt"

	"github.com/foldline/foldline/functions/keyed"
)

// StatefulFunc is a stateful transformation as its author writes it: from
// the state of the input's key and the input, the key's new state and the
// outputs. The state is per message key (Input.Key, the key the message
// carries on its topic: for a stage that reads the ledger, the entity key
// foldline ingest set), or a part of it (Stateful.WithStateKey); a state
// no input has reached yet is the zero S.
//
// It must be pure, as Func: the same state and input give the same new
// state and outputs, in the same order. It may change state in place (a
// map, a slice) when it returns no error; with an error the input's state
// change is void, and the input goes to the dead-letter topic with the
// error as the reason, its position recorded so that the same input,
// delivered again, is not computed again.
type StatefulFunc[S, E any] func(state S, in Input[E]) (S, []Output, error)

// Stateful binds a decoder and a stateful function. The runtime (package
// run) keeps its keys' states: in the tenant's Cassandra keyspace when
// deployed, in memory in a local run (verify, training sets, replays),
// which folds the ledger from its first event with the same code.
//
// S must survive encoding/json: the state of a key read back from
// Cassandra must behave as the state kept in memory
// (transformtest.RunStateful checks it for the states a test reaches).
type Stateful[S, E any] struct {
	decode   Decoder[E]
	fn       StatefulFunc[S, E]
	stateKey func(key string, event E) string
}

// NewStateful returns the stateful transformation that decodes each payload
// with decode and hands it with its key's state to fn.
func NewStateful[S, E any](decode Decoder[E], fn StatefulFunc[S, E]) *Stateful[S, E] {
	return &Stateful[S, E]{decode: decode, fn: fn}
}

// WithStateKey returns t with its states split finer than the message key:
// an input folds into the state stateKey names from its message key and
// its decoded event, instead of the message key's one state. Use it when
// a key's state would grow without bound (the event-id deduplication
// spreads a key's ids over buckets), so that a save rewrites a part of
// it. stateKey must depend on its arguments alone (a replay must name the
// same state), and must never give two message keys the same state key
// (a state has one writer: the instance its message key goes to).
func (t *Stateful[S, E]) WithStateKey(stateKey func(key string, event E) string) *Stateful[S, E] {
	c := *t
	c.stateKey = stateKey
	return &c
}

// KeyedProcessor is a stateful transformation as the runtime drives it.
type KeyedProcessor interface {
	Processor
	// StateCodec encodes and decodes the states for the store.
	StateCodec() keyed.Codec
	// ProcessKeyed decodes m, reads its key's state from store and returns
	// the records of m, with the transaction that the caller settles once
	// they are stored (nil when the input touched no state: it does not
	// decode). A redelivered input the store has folded gives no record.
	ProcessKeyed(ctx context.Context, store *keyed.Store, m Message) ([]Record, *keyed.Txn, error)
}

// ErrNeedsState is Process's error for a stateful transformation, which
// runs with its keys' states (ProcessKeyed), never without.
var ErrNeedsState = errors.New("a stateful transformation needs its keys' states: the runtime calls ProcessKeyed")

// Process returns ErrNeedsState: see ProcessKeyed.
func (t *Stateful[S, E]) Process(Message) ([]Record, error) { return nil, ErrNeedsState }

// StateCodec is encoding/json of S.
func (t *Stateful[S, E]) StateCodec() keyed.Codec { return keyed.JSON[S]() }

// ProcessKeyed implements KeyedProcessor. Its errors about the input
// (decoding, the function's, encoding its outputs or state, a stored
// state of another ledger epoch) are permanent; Begin's reading of the
// state ends only with ctx.
func (t *Stateful[S, E]) ProcessKeyed(ctx context.Context, store *keyed.Store, m Message) ([]Record, *keyed.Txn, error) {
	ev, err := t.decode(m.Payload)
	if err != nil {
		return nil, nil, &MalformedError{Err: err}
	}
	key := m.Key
	if t.stateKey != nil {
		key = t.stateKey(m.Key, ev)
	}
	txn, err := store.BeginDelivery(ctx, key, m.Origin, m.Delivery)
	if err != nil {
		return nil, nil, err
	}
	if txn.Duplicate() {
		return nil, txn, nil
	}
	state, _ := txn.State().(S)
	next, outs, err := t.fn(state, Input[E]{Key: m.Key, EventTime: m.EventTime, Event: ev})
	if err != nil {
		err = fmt.Errorf("transforming event: %w", err)
	}
	var recs []Record
	if err == nil {
		recs, err = encodeOutputs(outs, m, true)
	}
	if err == nil {
		err = txn.Commit(next)
	}
	if err != nil {
		if abortErr := txn.Abort(); abortErr != nil {
			return nil, nil, errors.Join(err, abortErr)
		}
		return nil, txn, err
	}
	return recs, txn, nil
}

// Configurable is a transformation with parameters in its function's user
// config (a generic stage, such as the event-id deduplication every tenant
// runs with its own id field): the runtime (package run) calls Configure
// with the user config before the first input and runs the transformation
// it returns. What Configure returns must depend on the user config alone,
// so that a local run, given the deployed config, runs the same.
type Configurable interface {
	Processor
	Configure(userConfig map[string]any) (Processor, error)
}
