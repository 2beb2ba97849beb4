package transformtest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/transform"
)

// RunStateful is the contract suite of a stateful transformation
// (transform.NewStateful). inputs are valid events in ledger order, each
// with its key (the state's), of which at least one must produce an
// output; inputs without an origin get distinct synthetic ones, in order.
// It checks:
//
//   - a fold of the inputs, whatever the process it runs in: stopping
//     after any input and carrying on in a new process from the saved
//     states (read back through the state's encoding, as a deployed
//     function reads them from Cassandra) gives the same records as one
//     process folding them all;
//   - an input delivered again, in the same process or in a new one, gives
//     no record;
//   - malformed input gives an error, never a panic, and every output
//     keeps its input's origin, as Run checks for stateless ones.
func RunStateful(t *testing.T, p transform.KeyedProcessor, inputs ...transform.Message) {
	t.Helper()
	runStateful(t, p, false, inputs)
}

// RunStatefulPassing is RunStateful for a stage that passes on what it
// cannot read, for the next stage to judge (the event-id deduplication):
// malformed input must not panic, but need not be an error.
func RunStatefulPassing(t *testing.T, p transform.KeyedProcessor, inputs ...transform.Message) {
	t.Helper()
	runStateful(t, p, true, inputs)
}

func runStateful(t *testing.T, p transform.KeyedProcessor, passes bool, inputs []transform.Message) {
	t.Helper()
	inputs = withOrigins(inputs, 0)
	backend := keyed.NewMemory()
	want := foldKeyed(t, newStore(backend, p), p, inputs)
	t.Run("outputs", func(t *testing.T) {
		produced := 0
		for i, r := range want {
			if r.Panic != "" || r.Err != "" {
				t.Errorf("valid input %s: %s%s", describe(inputs[i]), r.Err, r.Panic)
			}
			produced += len(r.Records)
		}
		if produced == 0 {
			t.Errorf("no input produced an output: give RunStateful at least one event that does")
		}
	})
	t.Run("origin kept", func(t *testing.T) {
		for i, r := range want {
			for j, rec := range r.Records {
				if w := inputs[i].Origin.Child(j, len(r.Records)); rec.Origin != w {
					t.Errorf("input %s: output %d has origin %+v, want %+v", describe(inputs[i]), j, rec.Origin, w)
				}
			}
		}
	})
	t.Run("a new process carries on from the saved states", func(t *testing.T) {
		for cut := 1; cut < len(inputs); cut++ {
			before := keyed.NewMemory()
			foldKeyed(t, newStore(before, p), p, inputs[:cut])
			after := foldKeyed(t, newStore(before, p), p, inputs[cut:])
			for i, got := range after {
				compare(t, fmt.Sprintf("a process started after input %d", cut), inputs[cut+i], want[cut+i], got)
			}
		}
	})
	t.Run("an input delivered again gives nothing", func(t *testing.T) {
		for _, store := range []*keyed.Store{newStore(backend, p)} {
			for i, r := range foldKeyed(t, store, p, inputs) {
				if len(r.Records) > 0 || r.Err != "" || r.Panic != "" {
					t.Errorf("input %s delivered again: %d records, %s%s", describe(inputs[i]), len(r.Records), r.Err, r.Panic)
				}
			}
		}
	})
	t.Run("malformed input is an error", func(t *testing.T) {
		bad := withOrigins(mustFail(inputs), len(inputs))
		for i, r := range foldKeyed(t, newStore(keyed.NewMemory(), p), p, bad) {
			if r.Panic != "" {
				t.Errorf("malformed input %s panicked: %s", describe(bad[i]), r.Panic)
			} else if r.Err == "" && !passes {
				t.Errorf("malformed input %s gave no error but %d outputs", describe(bad[i]), len(r.Records))
			}
		}
	})
}

// newStore is a store on backend as a local run makes one.
func newStore(backend *keyed.Memory, p transform.KeyedProcessor) *keyed.Store {
	return keyed.New(backend, p.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited})
}

// foldKeyed runs inputs through p with store, settling each at once as a
// runtime whose sends are confirmed at once does.
func foldKeyed(t *testing.T, store *keyed.Store, p transform.KeyedProcessor, inputs []transform.Message) []result {
	t.Helper()
	out := make([]result, len(inputs))
	for i, m := range inputs {
		out[i] = callKeyed(store, p, m)
	}
	return out
}

func callKeyed(store *keyed.Store, p transform.KeyedProcessor, m transform.Message) (r result) {
	defer func() {
		if v := recover(); v != nil {
			r = result{Panic: fmt.Sprintf("%v\n%s", v, debug.Stack())}
		}
	}()
	recs, txn, err := p.ProcessKeyed(context.Background(), store, m)
	if txn != nil {
		settled := false
		txn.Settle(func(error) { settled = true })
		if !settled {
			return result{Err: "not settled at once by a store in memory"}
		}
	}
	if err != nil {
		return result{Err: err.Error()}
	}
	return result{Records: recs}
}

// StateRoundTrips is a check a stateful transformation's test can make of
// states it builds by hand: encoded and decoded as the store does, the
// state is the same value.
func StateRoundTrips[S any](t testing.TB, state S) {
	t.Helper()
	data, err := json.Marshal(state)
	if err != nil {
		t.Fatalf("encoding state %+v: %v", state, err)
	}
	var back S
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("decoding state %s: %v", data, err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(data) {
		t.Errorf("state %s reads back as %s", data, again)
	}
}
