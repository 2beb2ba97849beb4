package keyed

import (
	"context"
	"encoding/json"
	"sync"
)

// Memory is a Backend in memory: what a local run (verify, training sets,
// replays) folds the states into, from the ledger's first event on.
type Memory struct {
	mu    sync.Mutex
	snaps map[string]Snapshot
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{snaps: map[string]Snapshot{}} }

// Load returns the snapshot saved under key.
func (m *Memory) Load(_ context.Context, key string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snaps[key], nil
}

// Save keeps snap unless a snapshot of a higher Applied is kept.
func (m *Memory) Save(_ context.Context, key string, snap Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.snaps[key]; !ok || snap.Applied >= old.Applied {
		m.snaps[key] = snap
	}
	return nil
}

// Keys returns how many keys hold a snapshot.
func (m *Memory) Keys() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.snaps)
}

// JSON returns the Codec of states of type S as encoding/json writes them:
// Decode(nil) is the zero S.
func JSON[S any]() Codec {
	return Codec{
		Encode: func(state any) ([]byte, error) { return json.Marshal(state) },
		Decode: func(data []byte) (any, error) {
			var s S
			if data == nil {
				return s, nil
			}
			err := json.Unmarshal(data, &s)
			return s, err
		},
	}
}
