package keyed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

const ledgerTopic = "persistent://t/ledger/events-partition-0"

// sim is a ledger, the reference fold of it and what the runtime made of
// it so far: the durable backend, the outputs downstream (deduplicated by
// origin, as every stage downstream does) and the acknowledgements.
type sim struct {
	t      *testing.T
	rng    *rand.Rand
	events []simEvent
	// want holds each event's output and the final states.
	want       map[int]string
	wantStates map[string]int
	durable    *Memory
	// immutable folds the sums as sumState (an ImmutableState), not int.
	immutable bool
	outputs   map[int]string
	acked     map[int]bool
	mu        sync.Mutex
}

type simEvent struct {
	key   string
	value int
}

func (e simEvent) rejected() bool { return e.value%7 == 0 }

func pos(i int) envelope.Position { return envelope.Position{Ledger: 1, Entry: int64(i), Epoch: "e1"} }

func newSim(t *testing.T, seed uint64, n, keys int) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 1)), want: map[int]string{}, wantStates: map[string]int{},
		durable: NewMemory(), outputs: map[int]string{}, acked: map[int]bool{}}
	for i := range n {
		e := simEvent{key: fmt.Sprintf("k%d", s.rng.IntN(keys)), value: s.rng.IntN(100)}
		s.events = append(s.events, e)
		s.want[i] = s.output(s.wantStates[e.key], e)
		if !e.rejected() {
			s.wantStates[e.key] += e.value
		}
	}
	return s
}

// output is what the transformation emits for e from the state sum: the
// new sum, or a dead letter.
func (s *sim) output(sum int, e simEvent) string {
	if e.rejected() {
		return fmt.Sprintf("%s dead letter at %d", e.key, sum)
	}
	return fmt.Sprintf("%s %d", e.key, sum+e.value)
}

// emit records an output downstream, checking that a redelivered one is
// the same.
func (s *sim) emit(i int, out string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.outputs[i]; ok && old != out {
		s.t.Errorf("event %d emitted %q again as %q", i, old, out)
	}
	s.outputs[i] = out
}

func (s *sim) unacked() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i := range s.events {
		if !s.acked[i] {
			out = append(out, i)
		}
	}
	return out
}

// process begins event i and computes it; it returns the transaction and
// its output ("" for a duplicate).
func (s *sim) process(store *Store, i int) (*Txn, string) {
	e := s.events[i]
	txn, err := store.Begin(context.Background(), e.key, envelope.Origin{Topic: ledgerTopic, Position: pos(i)})
	if err != nil {
		s.t.Fatal(err)
	}
	if txn.Duplicate() {
		return txn, ""
	}
	var sum int
	if s.immutable {
		sum = txn.State().(sumState).N
	} else {
		sum = txn.State().(int)
	}
	out := s.output(sum, e)
	switch {
	case e.rejected():
		err = txn.Abort()
	case s.immutable:
		err = txn.Commit(sumState{N: sum + e.value})
	default:
		err = txn.Commit(sum + e.value)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return txn, out
}

func (s *sim) check() {
	s.t.Helper()
	for i := range s.events {
		if s.outputs[i] != s.want[i] {
			s.t.Errorf("event %d: output %q, want %q", i, s.outputs[i], s.want[i])
		}
	}
	codec := s.codec()
	for key, want := range s.wantStates {
		snap, _ := s.durable.Load(context.Background(), key)
		got, err := codec.Decode(snap.State)
		if sum, ok := got.(sumState); ok {
			got = sum.N
		}
		if err != nil || got.(int) != want {
			s.t.Errorf("key %s: stored state %v (%v), want %d", key, got, err, want)
		}
	}
}

func (s *sim) codec() Codec {
	if s.immutable {
		return JSON[sumState]()
	}
	return JSON[int]()
}

// sumState is the sim's sum as an ImmutableState: the store keeps it as it
// is, and encodes it only for a save to a backend other than Memory, or
// when Memory hands it out. encodes counts its encodings.
type sumState struct{ N int }

var encodes atomic.Int64

func (sumState) ImmutableState() {}

func (s sumState) AppendJSON(buf []byte) []byte {
	encodes.Add(1)
	return fmt.Appendf(buf, `{"N":%d}`, s.N)
}

// bytesOnly is a backend that takes only encoded states, as Cassandra's.
type bytesOnly struct {
	Backend
	t *testing.T
}

func (b bytesOnly) Save(ctx context.Context, key string, snap Snapshot) error {
	if snap.value != nil {
		b.t.Errorf("key %s: a save of a state not encoded (%v)", key, snap.value)
	}
	return b.Backend.Save(ctx, key, snap)
}

type inFlight struct {
	i   int
	txn *Txn
	out string
}

// TestStoreEqualsTheFoldAcrossCrashesAndRedeliveries runs a ledger through
// the store as the runtime would, with outputs confirmed late, sessions
// that end (everything unacknowledged comes again to the same process),
// acknowledgements lost and crashes (a new process, the backend kept) at
// random points: the outputs downstream and the saved states equal the
// fold.
//
// Every other run's states are ImmutableStates, kept as they are.
func TestStoreEqualsTheFoldAcrossCrashesAndRedeliveries(t *testing.T) {
	for seed := range uint64(60) {
		// A third of the runs never crash: ended sessions alone must not
		// leave an input unacknowledged for good.
		crashRate := []float64{0.01, 0.002, 0}[seed%3]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newSim(t, seed, 300, 1+int(seed%6))
			s.immutable = seed%2 == 1
			crashes, sessions := 0, 0
			for round := 0; len(s.unacked()) > 0; round++ {
				if round > 1000 {
					t.Fatal("the ledger never got acknowledged")
				}
				cache := []int{Unlimited, Off, 1, 3}[s.rng.IntN(4)]
				store := New(s.durable, s.codec(), Options{Inline: true, CacheKeys: cache})
				crashed := false
				for session := 0; !crashed; session++ {
					if session > 200 {
						t.Fatalf("%d inputs never acknowledged in one process", len(s.unacked()))
					}
					queue := s.unacked()
					var sending, settling []inFlight
					for len(queue) > 0 || len(sending) > 0 || len(settling) > 0 {
						switch r := s.rng.Float64(); {
						case r < crashRate:
							crashed = true
							crashes++
						case r < 0.02:
							// A failed send ends the session: nothing more is
							// settled, and everything unacknowledged comes again.
							sessions++
							queue, sending, settling = nil, nil, nil
							continue
						case r < 0.5 && len(queue) > 0:
							txn, out := s.process(store, queue[0])
							sending = append(sending, inFlight{queue[0], txn, out})
							queue = queue[1:]
						case r < 0.75 && len(sending) > 0:
							if f := sending[0]; f.out != "" {
								s.emit(f.i, f.out)
							}
							settling = append(settling, sending[0])
							sending = sending[1:]
						case len(settling) > 0:
							f := settling[0]
							settling = settling[1:]
							lost := s.rng.Float64() < 0.1
							f.txn.Settle(func(err error) {
								if err != nil {
									t.Errorf("settled with %v", err)
								}
								if !lost {
									s.mu.Lock()
									s.acked[f.i] = true
									s.mu.Unlock()
								}
							})
						}
						if crashed {
							break
						}
					}
					if !crashed && len(s.unacked()) == 0 {
						break
					}
				}
			}
			s.check()
			t.Logf("%d crashes, %d ended sessions", crashes, sessions)
		})
	}
}

// slowMemory is a Memory whose saves take a while and sometimes fail.
type slowMemory struct {
	*Memory
	rng   *rand.Rand
	mu    sync.Mutex
	saves int
}

func (m *slowMemory) Save(ctx context.Context, key string, snap Snapshot) error {
	m.mu.Lock()
	d := time.Duration(m.rng.IntN(300)) * time.Microsecond
	fail := m.rng.IntN(10) == 0
	m.saves++
	m.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	if fail {
		return errors.New("write timed out")
	}
	return m.Memory.Save(ctx, key, snap)
}

// TestStoreConcurrentSavesCoalesce settles from several goroutines while
// saves run concurrently, slowly and sometimes failing, and kills the store
// a few times: a key's saves never overlap or go back, and the end equals
// the fold. With ImmutableStates, each save encodes the state it saves.
func TestStoreConcurrentSavesCoalesce(t *testing.T) {
	for _, immutable := range []bool{false, true} {
		t.Run(fmt.Sprintf("immutable %v", immutable), func(t *testing.T) { concurrentSavesCoalesce(t, immutable) })
	}
}

func concurrentSavesCoalesce(t *testing.T, immutable bool) {
	s := newSim(t, 99, 2000, 8)
	s.immutable = immutable
	slow := &slowMemory{Memory: s.durable, rng: rand.New(rand.NewPCG(7, 7))}
	var backend Backend = slow
	if immutable {
		backend = bytesOnly{Backend: slow, t: t}
	}
	for round := 0; len(s.unacked()) > 0; round++ {
		store := New(backend, s.codec(), Options{RetryBackoffMin: time.Millisecond, RetryBackoffMax: 2 * time.Millisecond, CacheKeys: 4})
		queue := s.unacked()
		if round < 3 {
			queue = queue[:len(queue)/2] // killed half way
		}
		var wg sync.WaitGroup
		for _, i := range queue {
			txn, out := s.process(store, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i%5) * 50 * time.Microsecond)
				if out != "" {
					s.emit(i, out)
				}
				txn.Settle(func(error) {
					s.mu.Lock()
					s.acked[i] = true
					s.mu.Unlock()
				})
			}()
		}
		wg.Wait()
		if round < 3 {
			store.Close() // saves in flight stop: their inputs stay unacknowledged
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(s.unacked()) > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		store.Close()
	}
	s.check()
	if slow.saves >= len(s.events) {
		t.Errorf("%d saves for %d events: saves of a key did not coalesce", slow.saves, len(s.events))
	}
	t.Logf("%d saves for %d events", slow.saves, len(s.events))
}

// TestImmutableStatesEncodeOnlyWhenHandedOut folds many inputs of a few keys
// into a Memory, as a local run does: no input encodes its state, and
// Changed encodes each changed key's once, as JSON's codec would.
func TestImmutableStatesEncodeOnlyWhenHandedOut(t *testing.T) {
	memory := NewMemory()
	store := New(memory, JSON[sumState](), Options{Inline: true, CacheKeys: Unlimited})
	before := encodes.Load()
	for i := range 1000 {
		txn, err := store.Begin(t.Context(), fmt.Sprint("k", i%3), envelope.Origin{Topic: ledgerTopic, Position: pos(i)})
		if err != nil {
			t.Fatal(err)
		}
		sum := txn.State().(sumState)
		if i%10 == 0 {
			err = txn.Abort()
		} else {
			err = txn.Commit(sumState{N: sum.N + i})
		}
		if err != nil {
			t.Fatal(err)
		}
		txn.Settle(func(error) {})
	}
	if n := encodes.Load() - before; n != 0 {
		t.Fatalf("%d encodings while folding, want none", n)
	}
	changed := memory.Changed()
	if n := encodes.Load() - before; n != 3 || len(changed) != 3 {
		t.Fatalf("%d encodings of %d changed keys, want 3 of 3", n, len(changed))
	}
	want, inputs := map[string]int{}, map[string]int64{}
	for i := range 1000 {
		key := fmt.Sprint("k", i%3)
		inputs[key]++
		if i%10 != 0 {
			want[key] += i
		}
	}
	for key, snap := range changed {
		if got := string(snap.State); got != fmt.Sprintf(`{"N":%d}`, want[key]) || snap.Applied != inputs[key] {
			t.Errorf("key %s: %s after %d inputs, want %d after %d", key, got, snap.Applied, want[key], inputs[key])
		}
		if snap.value != nil {
			t.Errorf("key %s: handed out without its bytes", key)
		}
	}
}

// TestStoreRefusesAnotherEpoch checks that an input of another epoch of
// its topic is refused rather than compared.
func TestStoreRefusesAnotherEpoch(t *testing.T) {
	store := New(NewMemory(), JSON[int](), Options{Inline: true})
	txn, err := store.Begin(t.Context(), "k", envelope.Origin{Topic: ledgerTopic, Position: pos(5)})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(1); err != nil {
		t.Fatal(err)
	}
	txn.Settle(func(error) {})
	other := pos(1)
	other.Epoch = "e2"
	if _, err := store.Begin(t.Context(), "k", envelope.Origin{Topic: ledgerTopic, Position: other}); !errors.Is(err, ErrEpochChanged) {
		t.Fatalf("Begin of another epoch: %v, want ErrEpochChanged", err)
	}
	// Unknown epochs compare, as the sink's do.
	unknown := pos(3)
	unknown.Epoch = ""
	txn, err = store.Begin(t.Context(), "k", envelope.Origin{Topic: ledgerTopic, Position: unknown})
	if err != nil || !txn.Duplicate() {
		t.Fatalf("Begin of an earlier position without epoch: %v, duplicate %v", err, txn != nil && txn.Duplicate())
	}
	if got := slices.Collect(func(yield func(int) bool) { yield(store.Keys()) }); got[0] != 1 {
		t.Errorf("keys %v", got)
	}
}

// TestUpstreamRepeatIsADuplicate: an upstream stage sends an input's output
// again (another message of the same origin) while the input's own outputs
// are in flight. The repeat is a duplicate, the inputs folded after the
// first are kept, and the saved state folds each input once. The same
// message delivered again (the runtime's session ended) still sets the key
// back to its last confirmed state, for the inputs from it on come again.
func TestUpstreamRepeatIsADuplicate(t *testing.T) {
	backend := NewMemory()
	store := New(backend, JSON[int](), Options{Inline: true})
	defer store.Close()
	begin := func(i int, delivery string) *Txn {
		t.Helper()
		txn, err := store.BeginDelivery(t.Context(), "k", envelope.Origin{Topic: ledgerTopic, Position: pos(i)}, delivery)
		if err != nil {
			t.Fatal(err)
		}
		return txn
	}
	add := func(txn *Txn, v int) int {
		t.Helper()
		if txn.Duplicate() {
			t.Fatal("a new input taken for a duplicate")
		}
		sum := txn.State().(int) + v
		if err := txn.Commit(sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	settled := 0
	settle := func(txns ...*Txn) {
		for _, txn := range txns {
			txn.Settle(func(error) { settled++ })
		}
	}
	a := begin(1, "m1")
	add(a, 1)
	b := begin(2, "m2")
	add(b, 10)
	repeat := begin(1, "m3")
	if !repeat.Duplicate() {
		t.Fatal("another message of input 1's origin, its outputs in flight: not a duplicate")
	}
	c := begin(3, "m4")
	if got := add(c, 100); got != 111 {
		t.Fatalf("input 3 folded into %d, want 111: the repeat of input 1 lost input 2", got)
	}
	settle(repeat, a, b, c)
	if settled != 4 {
		t.Fatalf("%d of 4 inputs settled once their state was saved", settled)
	}
	if got := string(backend.Snapshots()["k"].State); got != "111" {
		t.Fatalf("saved state %s, want 111", got)
	}

	d := begin(4, "m5")
	add(d, 1000)
	again := begin(4, "m5")
	if again.Duplicate() {
		t.Fatal("the same message of input 4, delivered again before its outputs were confirmed: a duplicate, want it computed again")
	}
	if got := add(again, 1000); got != 1111 {
		t.Fatalf("input 4 computed again into %d, want 1111 (from the confirmed 111)", got)
	}
	settle(d, again)
	if got := string(backend.Snapshots()["k"].State); got != "1111" {
		t.Fatalf("saved state %s, want 1111", got)
	}
}

// Memory.Changed gives the keys saved since it last gave them, a restored
// key not among them, and the snapshots go through EncodeSnapshots and
// DecodeSnapshots unchanged.
func TestMemoryChangedAndRestored(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	pos := map[string]envelope.Position{"persistent://t/ledger/events": {Ledger: 3, Entry: 4, Batch: 5}}
	m.Restore("old", Snapshot{State: []byte(`"o"`), Positions: pos, Applied: 7})
	_ = m.Save(ctx, "a", Snapshot{State: []byte(`"a"`), Positions: pos, Applied: 1})
	_ = m.Save(ctx, "", Snapshot{Positions: pos, Applied: 2})
	first := m.Changed()
	if len(first) != 2 || first["a"].Applied != 1 || first[""].Applied != 2 {
		t.Fatalf("first Changed: %v, want a and the empty key", first)
	}
	_ = m.Save(ctx, "old", Snapshot{State: []byte(`"o2"`), Positions: pos, Applied: 8})
	second := m.Changed()
	if len(second) != 1 || string(second["old"].State) != `"o2"` {
		t.Fatalf("second Changed: %v, want the restored key once saved", second)
	}
	if third := m.Changed(); len(third) != 0 {
		t.Fatalf("third Changed: %v, want nothing", third)
	}
	all := m.Snapshots()
	data, err := EncodeSnapshots(all)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshots(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, all) {
		t.Fatalf("snapshots after a round trip: %v, want %v", back, all)
	}
	if _, err := DecodeSnapshots([]byte(`{"k": {"positions": {"t": "x"}}}`)); err == nil {
		t.Fatal("a snapshot with a malformed position decoded")
	}
}
