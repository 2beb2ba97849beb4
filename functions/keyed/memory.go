package keyed

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/foldline/foldline/functions/envelope"
)

// Memory is a Backend in memory: what a local run (verify, training sets,
// replays) folds the states into, from the ledger's first event on. It
// keeps an ImmutableState as the store gives it, and encodes it only when
// it hands the snapshot out (Load, Changed, Snapshots).
type Memory struct {
	mu    sync.Mutex
	snaps map[string]Snapshot
	// changed holds the keys saved since Changed last took them.
	changed map[string]bool
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{snaps: map[string]Snapshot{}} }

// valueKeeper is a backend that takes snapshots whose state is not yet
// encoded (Snapshot.value): Memory.
type valueKeeper interface{ keepsValues() }

func (m *Memory) keepsValues() {}

// Load returns the snapshot saved under key.
func (m *Memory) Load(_ context.Context, key string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snaps[key].encoded(), nil
}

// Save keeps snap unless a snapshot of a higher Applied is kept.
func (m *Memory) Save(_ context.Context, key string, snap Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.snaps[key]; !ok || snap.Applied >= old.Applied {
		m.snaps[key] = snap
		if m.changed == nil {
			m.changed = map[string]bool{}
		}
		m.changed[key] = true
	}
	return nil
}

// Restore keeps snap as key's snapshot to start from (a resumed run's,
// saved before): unlike Save it does not count as a change.
func (m *Memory) Restore(key string, snap Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps[key] = snap
}

// Changed returns the snapshot of every key saved since the last call (the
// first call: since the start), by key.
func (m *Memory) Changed() map[string]Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Snapshot, len(m.changed))
	for key := range m.changed {
		out[key] = m.snaps[key].encoded()
	}
	m.changed = nil
	return out
}

// Keys returns how many keys hold a snapshot.
func (m *Memory) Keys() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.snaps)
}

// StateAppender is a state that writes its own JSON, valid by
// construction: JSON's codec calls AppendJSON instead of encoding/json,
// which would check and copy what a MarshalJSON wrote (about a sixth of a
// stateful stage's CPU when it encodes a state of many ids per input).
type StateAppender interface {
	AppendJSON(buf []byte) []byte
}

// JSON returns the Codec of states of type S as encoding/json writes them
// (or as S appends itself: StateAppender): Decode(nil) is the zero S.
func JSON[S any]() Codec {
	return Codec{
		Encode: func(state any) ([]byte, error) {
			if a, ok := state.(StateAppender); ok {
				return a.AppendJSON(nil), nil
			}
			return json.Marshal(state)
		},
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

// Snapshots returns every key's snapshot, by key.
func (m *Memory) Snapshots() map[string]Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Snapshot, len(m.snaps))
	for key, snap := range m.snaps {
		out[key] = snap.encoded()
	}
	return out
}

// snapshotJSON is a Snapshot as EncodeSnapshot writes it.
type snapshotJSON struct {
	State     *string           `json:"state"`
	Positions map[string]string `json:"positions"`
	Applied   int64             `json:"applied"`
}

// EncodeSnapshot writes a snapshot as JSON: how a local run hands its
// states to the process that saves them (a fused backfill).
func EncodeSnapshot(snap Snapshot) ([]byte, error) {
	snap = snap.encoded()
	j := snapshotJSON{Positions: make(map[string]string, len(snap.Positions)), Applied: snap.Applied}
	if snap.State != nil {
		s := string(snap.State)
		j.State = &s
	}
	for topic, p := range snap.Positions {
		j.Positions[topic] = p.String()
	}
	return json.Marshal(j)
}

// DecodeSnapshot reads what EncodeSnapshot wrote.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	var j snapshotJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Snapshot{}, fmt.Errorf("decoding a state snapshot: %w", err)
	}
	snap := Snapshot{Applied: j.Applied, Positions: make(map[string]envelope.Position, len(j.Positions))}
	if j.State != nil {
		snap.State = []byte(*j.State)
	}
	for topic, text := range j.Positions {
		p, err := envelope.ParsePosition(text)
		if err != nil {
			return Snapshot{}, fmt.Errorf("decoding a state snapshot: %w", err)
		}
		snap.Positions[topic] = p
	}
	return snap, nil
}

// EncodeSnapshots writes several keys' snapshots as one JSON object, by
// key: how a resumed run's driver hands a local run the states to start
// from (see Memory.Restore).
func EncodeSnapshots(snaps map[string]Snapshot) ([]byte, error) {
	raw := make(map[string]json.RawMessage, len(snaps))
	for key, snap := range snaps {
		data, err := EncodeSnapshot(snap)
		if err != nil {
			return nil, err
		}
		raw[key] = data
	}
	return json.Marshal(raw)
}

// DecodeSnapshots reads what EncodeSnapshots wrote.
func DecodeSnapshots(data []byte) (map[string]Snapshot, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("decoding state snapshots: %w", err)
	}
	snaps := make(map[string]Snapshot, len(raw))
	for key, data := range raw {
		snap, err := DecodeSnapshot(data)
		if err != nil {
			return nil, fmt.Errorf("the snapshot of key %q: %w", key, err)
		}
		snaps[key] = snap
	}
	return snaps, nil
}
