package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/sinks/cassandra"
)

// keyedHandler adapts a stateful transformation to the runtime: its keys'
// states live in memory in a local run, and in the state table deploy
// made (cqlstate) under the worker. Each input's state change is settled
// (pf.AfterSent) once its outputs are confirmed: see package keyed.
func keyedHandler(p transform.KeyedProcessor) func(context.Context, []byte) ([]pf.Record, error) {
	s := &keyedRun{p: p}
	return func(ctx context.Context, payload []byte) ([]pf.Record, error) {
		in, ok := pf.InputOf(ctx)
		if !ok {
			return nil, ErrNoFunctionContext
		}
		store, err := s.open(ctx)
		if err != nil {
			return nil, err
		}
		if pf.ImportedStates(ctx) {
			return nil, s.restore(ctx, payload)
		}
		m := transform.Message{Key: in.Message.Key(), EventTime: in.Message.EventTime(), Payload: payload, Origin: in.Origin}
		if id := in.Message.ID(); id != nil {
			m.Delivery = string(id.Serialize())
		}
		recs, txn, err := p.ProcessKeyed(ctx, store, m)
		if txn != nil {
			pf.AfterSent(ctx, txn.Settle)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err // shutting down: the input comes again
			}
			return nil, pf.Permanent(err)
		}
		return records(recs, m), nil
	}
}

// keyedRun opens the store of a stateful transformation's instance on its
// first input.
type keyedRun struct {
	p     transform.KeyedProcessor
	once  sync.Once
	store *keyed.Store
	err   error
	// memory holds the states of a local run.
	memory *keyed.Memory
}

func (s *keyedRun) open(ctx context.Context) (*keyed.Store, error) {
	s.once.Do(func() {
		if pf.RunsLocally(ctx) {
			// A local run folds the ledger from its first event, or
			// from a fused backfill's checkpoint with the states it
			// saved (restore): no key is ever read back. What changed
			// goes to whoever asks (a fused backfill, for the state
			// table of the copy it deploys).
			s.memory = keyed.NewMemory()
			s.store = keyed.New(s.memory, s.p.StateCodec(), keyed.Options{Inline: true, CacheKeys: keyed.Unlimited})
			pf.SetExporter(ctx, func() ([]pf.Record, error) { return exportStates(s.memory) })
			return
		}
		fc, _ := pf.FromContext(ctx)
		s.store, s.err = openTable(ctx, fc, s.p.StateCodec())
		if s.err != nil {
			// The instance cannot work: the worker restarts it, and its
			// status shows why.
			fc.Fail(s.err)
		}
	})
	return s.store, s.err
}

// restore takes the states a local run starts from (the driver's import,
// keyed.EncodeSnapshots), before its first input.
func (s *keyedRun) restore(ctx context.Context, payload []byte) error {
	if s.memory == nil {
		return errors.New("states imported into a function deployed under the worker")
	}
	snaps, err := keyed.DecodeSnapshots(payload)
	if err != nil {
		return err
	}
	for key, snap := range snaps {
		s.memory.Restore(key, snap)
	}
	pf.TakesImport(ctx)
	return nil
}

// exportStates returns the state of every key changed since the last
// export as a record keyed by the key (keyed.EncodeSnapshot), in key
// order.
func exportStates(memory *keyed.Memory) ([]pf.Record, error) {
	snaps := memory.Changed()
	records := make([]pf.Record, 0, len(snaps))
	for _, key := range slices.Sorted(maps.Keys(snaps)) {
		data, err := keyed.EncodeSnapshot(snaps[key])
		if err != nil {
			return nil, err
		}
		records = append(records, pf.Record{Key: key, Payload: data})
	}
	return records, nil
}

// ErrNoStateTable is returned by a stateful function deployed without its
// state table in its user config.
var ErrNoStateTable = errors.New("a stateful function needs its state table: user config " +
	cqlstate.UserConfigKeyspace + " and " + cqlstate.UserConfigTable + " (foldline deploy sets them)")

// stateSetupPatience is how long opening the state table is retried
// before the instance stops: a Cassandra restart takes well under it.
var stateSetupPatience = 2 * time.Minute

// openTable connects to the function's state table as its user config and
// secrets say, the Cassandra sink's way (hosts, consistency, tls_*, and the
// tenant's login), creating it if needed.
func openTable(ctx context.Context, fc *pf.FunctionContext, codec keyed.Codec) (*keyed.Store, error) {
	uc := fc.GetUserConfMap()
	keyspace, _ := uc[cqlstate.UserConfigKeyspace].(string)
	table, _ := uc[cqlstate.UserConfigTable].(string)
	if keyspace == "" || table == "" {
		return nil, ErrNoStateTable
	}
	settings, err := cassandra.ParseSettings(uc)
	if err != nil {
		return nil, fmt.Errorf("reading the state table's Cassandra settings: %w", err)
	}
	settings.Username, _ = fc.GetSecret(cassandra.SecretUsername)
	settings.Password, _ = fc.GetSecret(cassandra.SecretPassword)
	opts := keyed.Options{RetryBackoffMin: settings.RetryBackoffMin, RetryBackoffMax: settings.RetryBackoffMax}
	if n, ok := uc[cqlstate.UserConfigCache].(float64); ok {
		if opts.CacheKeys = int(n); n == 0 {
			opts.CacheKeys = keyed.Off
		}
	}
	wait, giveUp := settings.RetryBackoffMin, time.Now().Add(stateSetupPatience)
	for {
		session, err := cassandra.NewSession(settings)
		if err == nil {
			if err = cqlstate.Ensure(ctx, session, keyspace, table); err == nil {
				slog.Info("keeping the keys' states", "table", keyspace+"."+table)
				return keyed.New(cqlstate.New(session, keyspace, table), codec, opts), nil
			}
			cqlsession.Close(session)
		}
		if time.Now().After(giveUp) || ctx.Err() != nil {
			return nil, fmt.Errorf("opening state table %s.%s: %w", keyspace, table, err)
		}
		slog.Error("opening the state table, retrying", "table", keyspace+"."+table, "wait", wait, "error", err)
		time.Sleep(wait)
		wait = min(2*wait, settings.RetryBackoffMax)
	}
}

// configuredHandler configures c with the function's user config on the
// first input and then hands every input to the handler of what it
// returned. A config Configure refuses stops the instance with the error.
func configuredHandler(c transform.Configurable) func(context.Context, []byte) ([]pf.Record, error) {
	var (
		once sync.Once
		h    func(context.Context, []byte) ([]pf.Record, error)
		err  error
	)
	return func(ctx context.Context, payload []byte) ([]pf.Record, error) {
		once.Do(func() {
			fc, ok := pf.FromContext(ctx)
			if !ok {
				err = ErrNoFunctionContext
				return
			}
			var p transform.Processor
			if p, err = c.Configure(fc.GetUserConfMap()); err == nil {
				if _, again := p.(transform.Configurable); again {
					err = errors.New("Configure returned a transformation to configure again")
				}
			}
			if err != nil {
				err = fmt.Errorf("configuring the transformation: %w", err)
				fc.Fail(err)
				return
			}
			h = Handler(p)
		})
		if err != nil {
			return nil, err
		}
		return h(ctx, payload)
	}
}
