// Package keyed keeps the state of a stateful transformation per message
// key, so that what an input does — the outputs it causes and the change
// of its key's state — takes effect exactly once under at-least-once
// delivery: after a crash, a redelivery or a kill -9 at any point, the
// state and the outputs equal the fold of the ledger.
//
// The order of one input's work is what makes it exact:
//
//  1. Begin reads the key's state (from memory, or from the backend the
//     first time) and tells a redelivery from a new input: an input at or
//     before the key's last folded position of its origin partition is one.
//  2. The transformation computes the new state and its outputs from the
//     state Begin gave; Commit (or Abort, for an input it rejects) records
//     them in memory only.
//  3. The runtime sends the outputs and waits until the broker has them
//     (package pf, AfterSent), then calls Settle.
//  4. Settle marks the input confirmed. Once every earlier input of its key
//     is confirmed too, the key's state as of this input is saved (one
//     save per key at a time; later states coalesce into the next), and
//     only once the backend holds a state at or past the input does the
//     runtime acknowledge it.
//
// So the backend never holds a state whose outputs are not all stored,
// and every input the backend does not cover is unacknowledged and comes
// again: a crash between the outputs and the save gives, from the saved
// state, the same outputs with the same origin positions again, which
// every stage downstream recognises as redeliveries. A redelivered input
// the saved state covers gives no output: its outputs were stored before
// the state was.
//
// In one process, an input delivered again before its outputs were
// confirmed (a failed send ends the runtime's session, and everything not
// acknowledged comes again) sets its key back to the state of its last
// confirmed input, and the inputs after it are computed again from there.
// Another message with the origin of an input folded and not yet confirmed
// is not such a redelivery: an upstream stage sent the same output again
// (it was killed between its send and its acknowledgement), and nothing
// after it will come again. BeginDelivery tells the two apart by the
// message's identity on its topic; the second is a duplicate, settled once
// the input it repeats is saved.
//
// A key's state is saved with its count of folded inputs (Snapshot.Applied)
// as its version, and a backend never lets a save of a lower version
// replace a higher one (Cassandra: USING TIMESTAMP). Two processes that
// fold the same key for a moment (a partition handed from one instance to
// another) compute the same states from the same inputs, so whichever
// save lands last, the row never goes back.
//
// The Store is used by one goroutine that calls Begin, Commit and Abort in
// input order (the handler's); Settle and the saves run on any goroutine.
package keyed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"container/list"

	"github.com/foldline/foldline/functions/envelope"
)

// Snapshot is a key's state as of an input: what a backend stores.
type Snapshot struct {
	// State is the encoded state (Codec); nil is the initial state, of a
	// key no input has reached yet.
	State []byte
	// Positions holds, per origin topic (ledger partition), the position
	// of the last input folded into the state.
	Positions map[string]envelope.Position
	// Applied counts the inputs folded into the state, rejected ones
	// included: the snapshot's version.
	Applied int64
	// value is the state itself while it is not yet encoded (State is nil
	// then): an ImmutableState, encoded only when a backend needs its bytes.
	value ImmutableState
}

// ImmutableState is a state that never changes once a transformation has
// returned it: its methods give changed copies and leave the value they
// are called on as it was (dedup.State). The store keeps such a state as
// it is instead of encoding it after every input, and encodes it, with its
// AppendJSON (what JSON's codec writes for it; it cannot fail), only when
// bytes are needed: a save to a backend other than Memory (on the save's
// goroutine, once for the inputs the save coalesces), or a Memory's
// snapshots handed out (a local run's export). A state that a
// transformation may change in place must not be one: a snapshot waiting
// for its save, or an aborted input's state, would change under the
// store.
type ImmutableState interface {
	StateAppender
	// ImmutableState marks the type; it is never called.
	ImmutableState()
}

// encoded returns s with its state as bytes.
func (s Snapshot) encoded() Snapshot {
	if s.value != nil {
		s.State, s.value = s.value.AppendJSON(nil), nil
	}
	return s
}

// Covers reports whether the snapshot has folded the input at pos of
// topic: positions of one origin partition come in order, so any position
// at or before the last one folded is.
func (s Snapshot) Covers(topic string, pos envelope.Position) bool {
	last, ok := s.Positions[topic]
	return ok && last.SameEpoch(pos) && pos.Compare(last) <= 0
}

// with returns the snapshot after an input at pos of topic with the new
// state, encoded (state) or kept as it is (value).
func (s Snapshot) with(topic string, pos envelope.Position, state []byte, value ImmutableState) Snapshot {
	if pos.Epoch == "" {
		pos.Epoch = s.Positions[topic].Epoch
	}
	positions := make(map[string]envelope.Position, len(s.Positions)+1)
	maps.Copy(positions, s.Positions)
	positions[topic] = pos
	return Snapshot{State: state, value: value, Positions: positions, Applied: s.Applied + 1}
}

// Backend stores one Snapshot per key.
type Backend interface {
	// Load returns the key's snapshot, the zero Snapshot when it has none.
	Load(ctx context.Context, key string) (Snapshot, error)
	// Save stores the key's snapshot unless the backend holds one of a
	// higher Applied: a save that arrives late never takes a key back.
	// Saves of one key never overlap.
	Save(ctx context.Context, key string, snap Snapshot) error
}

// Codec turns states into bytes and back. Decode(nil) is the initial
// state; Decode(Encode(s)) must behave as s does in the transformation.
// An ImmutableState is encoded by its AppendJSON, whatever the codec: its
// codec must be JSON's.
type Codec struct {
	Encode func(state any) ([]byte, error)
	Decode func(data []byte) (any, error)
}

// ErrEpochChanged is matched by Begin's error for an input of another
// epoch of its ledger topic than the key's state has folded (the topic was
// created anew, and its positions started again): the state must be built
// anew (a backfill), not carried on.
var ErrEpochChanged = errors.New("input comes from another epoch of its ledger topic")

// ErrUndecodable is matched by Begin's error for a stored state the codec
// cannot read (the state's type changed under a deployed table).
var ErrUndecodable = errors.New("the stored state cannot be decoded")

// Unlimited, as Options.CacheKeys, keeps every key in memory.
const Unlimited = -1

// Options tune a Store. Zero fields take their defaults.
type Options struct {
	// CacheKeys bounds the settled keys kept in memory, whose state then
	// needs no read; the least recently used go first. Keys with inputs in
	// flight always stay. Default 100000; Unlimited keeps all; Off keeps
	// none (each key is read again once settled: for several instances
	// that take keys over from one another).
	CacheKeys int
	// Concurrency bounds the saves in flight. Default 32.
	Concurrency int
	// RetryBackoffMin and RetryBackoffMax bound the wait between attempts
	// of a read or save that failed: they are retried until they succeed
	// (a read: until the context ends). Defaults 100ms and 10s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Inline saves in the caller's goroutine instead of a goroutine of the
	// save's own: for a backend that answers at once (Memory), where a
	// local run then settles each input before the next.
	Inline bool
	// Log receives retries; default slog.Default().
	Log *slog.Logger
}

// Off, as Options.CacheKeys, keeps no settled key in memory.
const Off = -2

func (o Options) withDefaults() Options {
	if o.CacheKeys == 0 {
		o.CacheKeys = 100000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.RetryBackoffMin <= 0 {
		o.RetryBackoffMin = 100 * time.Millisecond
	}
	if o.RetryBackoffMax < o.RetryBackoffMin {
		o.RetryBackoffMax = max(10*time.Second, o.RetryBackoffMin)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Store keeps the keys' states: see the package documentation.
type Store struct {
	backend Backend
	codec   Codec
	opts    Options

	ctx    context.Context // ends with Close: saves stop retrying
	cancel context.CancelFunc
	saves  chan struct{} // a token per save in flight
	wg     sync.WaitGroup

	mu   sync.Mutex
	keys map[string]*entry
	idle *list.List // settled entries, most recently used first
}

// entry is one key's state in memory.
type entry struct {
	key string
	// cur is the decoded state after every input begun so far, curSnap
	// the same as a snapshot.
	cur     any
	curSnap Snapshot
	// confirmed is the state after the longest run of inputs, in order,
	// whose outputs are all confirmed; persisted what the backend holds
	// (the last save, or the load).
	confirmed, persisted Snapshot
	saving               bool
	// pending are the inputs committed and not yet confirmed, in order.
	pending []*event
	// waiters are the settles waiting for the backend to hold their input.
	waiters []waiter
	// refs counts the transactions begun and not yet settled.
	refs int
	// gen counts resets (see Begin): confirmations of inputs begun before
	// the last one count for nothing.
	gen uint64
	// idleAt is the entry's element of Store.idle while it is settled.
	idleAt *list.Element
}

// event is one committed input of a key.
type event struct {
	snap Snapshot
	// topic is the input's origin topic (its position there is
	// snap.Positions[topic]), delivery the identity of the message that
	// brought it ("" when unknown).
	topic     string
	delivery  string
	gen       uint64
	confirmed bool
}

// waiter is a settle waiting for the backend to cover its input.
type waiter struct {
	topic string
	pos   envelope.Position
	done  func(error)
}

// New returns a store of the states in backend.
func New(backend Backend, codec Codec, opts Options) *Store {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{
		backend: backend, codec: codec, opts: opts, ctx: ctx, cancel: cancel,
		saves: make(chan struct{}, opts.Concurrency),
		keys:  map[string]*entry{}, idle: list.New(),
	}
}

// Close stops the saves in flight (their inputs stay unacknowledged, and
// come again) and waits for them.
func (s *Store) Close() {
	s.cancel()
	s.wg.Wait()
}

// Txn is one input's work on its key's state, from Begin to Settle.
type Txn struct {
	s        *Store
	e        *entry
	topic    string
	pos      envelope.Position
	delivery string
	dup      bool
	ev       *event
	ended    bool
}

// Begin starts the work of the input at origin on key's state. It reads
// the key's state from the backend when it is not in memory, retrying
// until it succeeds or ctx ends. For a redelivered input (Duplicate) the
// caller computes nothing and only settles; for any other it calls State,
// then Commit or Abort, then Settle once its outputs are confirmed.
func (s *Store) Begin(ctx context.Context, key string, origin envelope.Origin) (*Txn, error) {
	return s.BeginDelivery(ctx, key, origin, "")
}

// BeginDelivery is Begin for an input that came in the message delivery
// (its identity on its topic, such as its serialized message ID): an input
// whose origin the key has folded, not yet confirmed, from another message
// is a duplicate (an upstream stage sent it again), where one from the
// same message, or of unknown delivery (""), sets the key back to its last
// confirmed state (the inputs from it on come again).
func (s *Store) BeginDelivery(ctx context.Context, key string, origin envelope.Origin, delivery string) (*Txn, error) {
	e, err := s.entry(ctx, key)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := e.curSnap.Positions[origin.Topic]; ok && !last.SameEpoch(origin.Position) {
		e.refs--
		s.release(e)
		return nil, fmt.Errorf("%w: key %q has folded %s up to %s, and the input is at %s: build the state anew (foldline backfill)",
			ErrEpochChanged, key, origin.Topic, last, origin.Position)
	}
	t := &Txn{s: s, e: e, topic: origin.Topic, pos: origin.Position, delivery: delivery}
	if e.curSnap.Covers(origin.Topic, origin.Position) {
		if e.confirmed.Covers(origin.Topic, origin.Position) {
			t.dup = true
			return t, nil
		}
		if ev := e.pendingAt(origin); ev != nil && delivery != "" && ev.delivery != "" && ev.delivery != delivery {
			// Another message of an input folded, its outputs in
			// flight: an upstream stage's repeat, whose effect is the
			// folded input's. It only waits for that input's save.
			t.dup = true
			return t, nil
		}
		// Delivered again before its outputs were confirmed: the inputs
		// from it on come again, in order, and are computed again from
		// the state of the last confirmed one.
		if err := s.reset(e); err != nil {
			e.refs--
			s.release(e)
			return nil, err
		}
	}
	return t, nil
}

// pendingAt returns the committed, unconfirmed input of e at origin, nil
// when there is none.
func (e *entry) pendingAt(origin envelope.Origin) *event {
	for _, ev := range e.pending {
		if pos, ok := ev.snap.Positions[origin.Topic]; ok && ev.topic == origin.Topic && pos.SameEpoch(origin.Position) && pos.Compare(origin.Position) == 0 {
			return ev
		}
	}
	return nil
}

// entry returns key's entry, loading it when it is not in memory, with a
// reference taken.
func (s *Store) entry(ctx context.Context, key string) (*entry, error) {
	s.mu.Lock()
	if e, ok := s.keys[key]; ok {
		s.hold(e)
		s.mu.Unlock()
		return e, nil
	}
	s.mu.Unlock()
	snap, err := s.load(ctx, key)
	if err != nil {
		return nil, err
	}
	state, err := s.stateOf(key, snap)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only the handler's goroutine begins: nobody loaded the key meanwhile.
	e := &entry{key: key, cur: state, curSnap: snap, confirmed: snap, persisted: snap}
	s.keys[key] = e
	s.hold(e)
	return e, nil
}

// load reads key's snapshot, retrying until it succeeds or ctx ends.
func (s *Store) load(ctx context.Context, key string) (Snapshot, error) {
	wait := s.opts.RetryBackoffMin
	for {
		snap, err := s.backend.Load(ctx, key)
		if err == nil {
			return snap, nil
		}
		s.opts.Log.Warn("reading a key's state, retrying", "key", key, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return Snapshot{}, fmt.Errorf("reading the state of key %q: %w (last error: %w)", key, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, s.opts.RetryBackoffMax)
	}
}

// hold takes a reference on e, which keeps it in memory.
func (s *Store) hold(e *entry) {
	e.refs++
	if e.idleAt != nil {
		s.idle.Remove(e.idleAt)
		e.idleAt = nil
	}
}

// stateOf returns the state snap holds: its value, or its bytes decoded.
func (s *Store) stateOf(key string, snap Snapshot) (any, error) {
	if snap.value != nil {
		return snap.value, nil
	}
	state, err := s.codec.Decode(snap.State)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", ErrUndecodable, key, err)
	}
	return state, nil
}

// reset sets e back to its confirmed state, forgetting the inputs committed
// after it.
func (s *Store) reset(e *entry) error {
	state, err := s.stateOf(e.key, e.confirmed)
	if err != nil {
		return err
	}
	e.gen++
	e.pending = nil
	e.cur, e.curSnap = state, e.confirmed
	return nil
}

// Duplicate reports whether the input was folded before and its outputs
// stored: it must cause nothing, and only be settled.
func (t *Txn) Duplicate() bool { return t.dup }

// State returns the key's state before the input. The transformation may
// change it in place only if it then commits.
func (t *Txn) State() any {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.e.cur
}

// Commit records state as the key's state after the input. An error (the
// state does not encode) records nothing: the caller aborts instead. An
// ImmutableState is kept as it is, to be encoded when a save needs it.
func (t *Txn) Commit(state any) error {
	value, kept := state.(ImmutableState)
	var data []byte
	if !kept {
		var err error
		if data, err = t.s.codec.Encode(state); err != nil {
			return fmt.Errorf("encoding the state of key %q: %w", t.e.key, err)
		}
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.commit(state, data, value)
	return nil
}

// Abort records the input as folded without changing the state: an input
// the transformation rejects (its dead letter is its output) is rejected
// again from the same state if it comes again. A state the transformation
// changed in place is read back.
func (t *Txn) Abort() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	e := t.e
	state, err := t.s.stateOf(e.key, e.curSnap)
	if err != nil {
		return err
	}
	t.commit(state, e.curSnap.State, e.curSnap.value)
	return nil
}

func (t *Txn) commit(state any, data []byte, value ImmutableState) {
	if t.dup || t.ev != nil {
		panic("keyed: a transaction committed twice, or a duplicate committed")
	}
	e := t.e
	e.cur = state
	e.curSnap = e.curSnap.with(t.topic, t.pos, data, value)
	t.ev = &event{snap: e.curSnap, topic: t.topic, delivery: t.delivery, gen: e.gen}
	e.pending = append(e.pending, t.ev)
}

// Settle is the transaction's pf.AfterSent: the input's outputs are
// confirmed. done is called once the backend holds a state that covers the
// input (at once for a redelivery it already covers), and never with an
// error: a save that fails is retried until the store is closed.
func (t *Txn) Settle(done func(error)) {
	s, e := t.s, t.e
	s.mu.Lock()
	if t.ended {
		s.mu.Unlock()
		panic("keyed: a transaction settled twice")
	}
	t.ended = true
	e.refs--
	if t.ev != nil && t.ev.gen == e.gen {
		t.ev.confirmed = true
		for len(e.pending) > 0 && e.pending[0].confirmed {
			e.confirmed = e.pending[0].snap
			e.pending = e.pending[1:]
		}
	}
	// An input of an earlier generation counts once the input it was
	// computed again as is saved.
	e.waiters = append(e.waiters, waiter{topic: t.topic, pos: t.pos, done: done})
	ready := s.ready(e)
	save, snap := s.startSave(e)
	s.release(e)
	s.mu.Unlock()
	for _, w := range ready {
		w.done(nil)
	}
	if save {
		s.save(e, snap)
	}
}

// release puts e among the idle entries, or drops it, once nothing holds it.
func (s *Store) release(e *entry) {
	if e.refs > 0 || len(e.pending) > 0 || len(e.waiters) > 0 || e.saving || e.persisted.Applied != e.curSnap.Applied {
		return
	}
	if s.keys[e.key] != e {
		return
	}
	if s.opts.CacheKeys == Off {
		delete(s.keys, e.key)
		return
	}
	if e.idleAt == nil {
		e.idleAt = s.idle.PushFront(e)
	}
	for s.opts.CacheKeys != Unlimited && s.idle.Len() > s.opts.CacheKeys {
		old := s.idle.Remove(s.idle.Back()).(*entry)
		old.idleAt = nil
		delete(s.keys, old.key)
	}
}

// ready removes and returns the waiters of e that the backend covers.
func (s *Store) ready(e *entry) []waiter {
	var ready []waiter
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if e.persisted.Covers(w.topic, w.pos) {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	return ready
}

// startSave marks a save of e's confirmed state as started when one is
// due and none is in flight, and returns the snapshot to save.
func (s *Store) startSave(e *entry) (bool, Snapshot) {
	if e.saving || e.confirmed.Applied <= e.persisted.Applied {
		return false, Snapshot{}
	}
	e.saving = true
	return true, e.confirmed
}

// save saves snap as e's state, inline or on a goroutine of its own
// (Options.Inline), then the next state due.
func (s *Store) save(e *entry, snap Snapshot) {
	if s.opts.Inline {
		s.saveLoop(e, snap)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.saveLoop(e, snap)
	}()
}

// saveLoop saves snap, retrying, and then whatever became due meanwhile.
func (s *Store) saveLoop(e *entry, snap Snapshot) {
	for {
		if !s.saveOne(e.key, snap) {
			return // closed: the inputs it covers stay unacknowledged
		}
		s.mu.Lock()
		e.saving = false
		if snap.Applied > e.persisted.Applied {
			e.persisted = snap
		}
		ready := s.ready(e)
		var again bool
		again, snap = s.startSave(e)
		s.release(e)
		s.mu.Unlock()
		for _, w := range ready {
			w.done(nil)
		}
		if !again {
			return
		}
	}
}

// saveOne saves snap under key, retrying until it succeeds (true) or the
// store is closed (false). A state kept as it is (ImmutableState) is
// encoded here, unless the backend keeps it so too (Memory).
func (s *Store) saveOne(key string, snap Snapshot) bool {
	select {
	case s.saves <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	defer func() { <-s.saves }()
	if _, keeps := s.backend.(valueKeeper); !keeps {
		snap = snap.encoded()
	}
	wait := s.opts.RetryBackoffMin
	for {
		err := s.backend.Save(s.ctx, key, snap)
		if err == nil {
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
		s.opts.Log.Warn("saving a key's state, retrying", "key", key, "wait", wait, "error", err)
		select {
		case <-s.ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, s.opts.RetryBackoffMax)
	}
}

// Keys returns how many keys are in memory.
func (s *Store) Keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
