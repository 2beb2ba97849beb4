package cassandra

import "sync"

// interner remembers values by the bytes they were made from, so that the
// keys and texts a view sees again and again (its users, its urls) are
// decoded, checked and boxed once instead of costing allocations on every
// operation. It holds at most limit entries and forgets them all when
// full: a stream with more distinct values just gains nothing. Safe for
// concurrent use.
type interner[V any] struct {
	mu    sync.Mutex
	m     map[string]V
	limit int
}

// Values up to internMaxBytes long are interned; internLimit bounds the
// entries of one interner (a few MB at most).
const (
	internMaxBytes = 128
	internLimit    = 1 << 14
)

func newInterner[V any]() *interner[V] {
	return &interner[V]{m: make(map[string]V), limit: internLimit}
}

// lookup returns the value remembered for key.
func (in *interner[V]) lookup(key []byte) (V, bool) {
	in.mu.Lock()
	v, ok := in.m[string(key)] // no allocation: the compiler reads key in place
	in.mu.Unlock()
	return v, ok
}

// store remembers v for key, when key is short enough to be worth it.
func (in *interner[V]) store(key []byte, v V) {
	if len(key) > internMaxBytes {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.m) >= in.limit {
		clear(in.m)
	}
	in.m[string(key)] = v
}
