// Package dedup is the stage that makes ingestion exactly once per event
// id: it reads a tenant's ledger and passes each event on, unchanged, the
// first time its id comes under its key, and never again — whichever file,
// process or producer published it, however long after. foldline ingest
// and the producer package (admin/ingest/producer) retry freely because of
// it, and the broker's own deduplication, which forgets a producer after
// hours of silence and knows nothing of the same event in another file,
// is only a first line.
//
// It is a stateful transformation (transform.NewStateful) keyed by the
// message key, the entity key ingest sets: the ids seen under a key are
// its state, so one writer per key (the runtime's key-ordered
// subscription) keeps it exact and the stage scales out as any other. A
// key's ids are spread over buckets (user config idBuckets, default 64;
// BucketOf), each bucket a state of its own (transform.WithStateKey), so
// that a save rewrites a 64th of a key's ids, not all of them. The id
// field is the tenant's (its manifest's eventId), given to the stage as
// user config eventIdField (foldline deploy sets it; default id).
//
// What it decides:
//   - an event whose id was seen under its key is dropped: no output, so
//     no view moves;
//   - the same id under another key is another event: ids are unique per
//     entity (see docs/ingestion.md for why, and what it would cost
//     otherwise);
//   - an event with no id it can read (not a JSON object, no such field, or
//     a value other than a string or a number) passes on, for the next stage
//     to judge: the shop's validate dead-letters it with the reason.
package dedup

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/foldline/foldline/functions/envelope/jsonwire"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/internal/confnum"
)

// UserConfigIDField names the event field that holds the event's id.
const UserConfigIDField = "eventIdField"

// DefaultIDField is the id field when the user config names none.
const DefaultIDField = "id"

// UserConfigIDBuckets is the user config that sets how many buckets (states)
// a key's ids are spread over. Changing it changes where every id is
// looked for: the stage's config changes, and the views it feeds are
// rebuilt by a backfill (foldline plan says so), never in place.
const UserConfigIDBuckets = "idBuckets"

// DefaultIDBuckets is the buckets per key when the user config sets none:
// a save rewrites a 64th of a key's ids, and a key costs at most 64 reads
// of its states before they are all in memory. Each save encodes its
// bucket's ids, so a deployed stage's CPU per save grows with the ids per
// bucket (docs/ingestion.md, Limits).
const DefaultIDBuckets = 64

// MaxIDBuckets bounds idBuckets: a bucket's state key ends with its number
// in three hexadecimal digits.
const MaxIDBuckets = 4096

// State is a bucket's state: the ids seen under its key that fall in it.
//
// It is a keyed.ImmutableState: Add returns a new State and never changes
// the one it is called on, so the store keeps states as they are and
// encodes one only when it is saved (deployed: once per save, on the
// save's goroutine) or exported (a local run's checkpoint), not after
// every input: on a long ledger, a bucket's encoding per input was most of
// the stage's CPU (perf: the fused backfill's chain, 1 000 000 events).
//
// The ids are in two sorted slices, no id in both: base, and recent, the
// ids added since base was last rebuilt. An Add copies recent with the new
// id (a copy of base, with recent merged in, once recent holds about the
// square root of base's length), so an Add costs about the square root of
// the ids in its bucket, and a lookup is two binary searches.
type State struct {
	base, recent []string
}

// StateOf returns the state that holds ids.
func StateOf(ids ...string) State {
	list := slices.Sorted(slices.Values(ids))
	return State{base: slices.Compact(list)}
}

// ImmutableState marks State as a keyed.ImmutableState.
func (State) ImmutableState() {}

// Len returns how many ids the state holds.
func (s State) Len() int { return len(s.base) + len(s.recent) }

// IDs returns the state's ids, sorted.
func (s State) IDs() []string {
	ids := make([]string, 0, s.Len())
	s.each(func(id string) { ids = append(ids, id) })
	return ids
}

// each calls f with every id, in order.
func (s State) each(f func(string)) {
	b, r := s.base, s.recent
	for len(b) > 0 || len(r) > 0 {
		if len(r) == 0 || (len(b) > 0 && b[0] < r[0]) {
			f(b[0])
			b = b[1:]
		} else {
			f(r[0])
			r = r[1:]
		}
	}
}

// Has reports whether id is among the state's ids.
func (s State) Has(id string) bool {
	if _, found := slices.BinarySearch(s.recent, id); found {
		return true
	}
	_, found := slices.BinarySearch(s.base, id)
	return found
}

// Add returns the state with id among its ids: s itself when it holds id
// already (its Len then tells), else a new State; s is left as it was.
func (s State) Add(id string) State {
	i, found := slices.BinarySearch(s.recent, id)
	if !found {
		_, found = slices.BinarySearch(s.base, id)
	}
	if found {
		return s
	}
	recent := make([]string, len(s.recent)+1)
	copy(recent, s.recent[:i])
	recent[i] = id
	copy(recent[i+1:], s.recent[i:])
	if len(recent)*len(recent) <= max(len(s.base), 256) {
		return State{base: s.base, recent: recent}
	}
	base := make([]string, 0, len(s.base)+len(recent))
	State{base: s.base, recent: recent}.each(func(id string) { base = append(base, id) })
	return State{base: base}
}

// AppendJSON appends the state as JSON, {"ids":["a","b"]} with the ids
// sorted ({} for none): what keyed.JSON writes for it (keyed.StateAppender),
// valid by construction.
func (s State) AppendJSON(buf []byte) []byte {
	if s.Len() == 0 {
		return append(buf, "{}"...)
	}
	size := len(`{"ids":[]}`)
	s.each(func(id string) { size += len(id) + 3 })
	buf = slices.Grow(buf, size)
	buf = append(buf, `{"ids":[`...)
	first := true
	s.each(func(id string) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = jsonwire.AppendString(buf, id)
	})
	return append(buf, "]}"...)
}

// MarshalJSON writes what AppendJSON appends.
func (s State) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// UnmarshalJSON reads what MarshalJSON writes, and the object of ids
// ({"ids":{"a":true}}) that states were saved as before; the ids come out
// sorted and each once whatever order they were saved in.
func (s *State) UnmarshalJSON(data []byte) error {
	var wire struct {
		IDs json.RawMessage `json:"ids"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return fmt.Errorf("reading a dedup state: %w", err)
	}
	*s = State{}
	if len(wire.IDs) == 0 || string(wire.IDs) == "null" {
		return nil
	}
	var list []string
	if err := json.Unmarshal(wire.IDs, &list); err != nil {
		var set map[string]bool
		if err := json.Unmarshal(wire.IDs, &set); err != nil {
			return fmt.Errorf("reading a dedup state's ids: want an array of strings: %w", err)
		}
		for id, seen := range set {
			if seen {
				list = append(list, id)
			}
		}
	}
	if len(list) == 0 {
		return nil
	}
	*s = StateOf(list...)
	return nil
}

// Event is a ledger event as the stage sees it: its payload, and its id.
type Event struct {
	Payload []byte
	// ID is the id's text ("" when the event has none the stage reads): a
	// string's value, or a number as JSON writes it.
	ID string
}

// Stage is the deduplication: its user config (Configure) sets the id
// field and the buckets.
type Stage struct {
	*transform.Stateful[State, Event]
}

// Transformation is the stage the runtime configures from the user config
// (Configure): a generic stage's one-line main runs it.
var Transformation = New(DefaultIDField, DefaultIDBuckets)

// New returns the deduplication by field, each key's ids spread over
// buckets states (1: the key's one state, as a plain stateful stage).
func New(field string, buckets int) *Stage {
	st := transform.NewStateful(decoder(field), distinct)
	if buckets > 1 {
		st = st.WithStateKey(func(key string, e Event) string { return StateKey(key, BucketOf(e.ID, buckets)) })
	}
	return &Stage{Stateful: st}
}

// BucketOf is the bucket, of buckets, that holds id: its 32-bit FNV-1a hash
// modulo buckets. It must never change: a changed bucket would look for a
// seen id where it is not, and pass the event again.
func BucketOf(id string, buckets int) int {
	const offset, prime = 2166136261, 16777619 // FNV-1a, 32 bits
	h := uint32(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * prime
	}
	return int(h % uint32(buckets))
}

// StateKey is the state key of a message key's bucket: the key, '#', and
// the bucket in three hexadecimal digits. The suffix has a fixed length,
// so two (key, bucket) pairs never share a state key.
func StateKey(key string, bucket int) string {
	const digits = "0123456789abcdef"
	return key + string([]byte{'#', digits[bucket>>8&0xf], digits[bucket>>4&0xf], digits[bucket&0xf]})
}

// Configure returns the stage for the user config's id field and buckets.
func (s *Stage) Configure(userConfig map[string]any) (transform.Processor, error) {
	field := DefaultIDField
	if v, ok := userConfig[UserConfigIDField]; ok {
		text, ok := v.(string)
		if !ok || text == "" {
			return nil, fmt.Errorf("%s %v: want the name of the events' id field", UserConfigIDField, v)
		}
		field = text
	}
	buckets := DefaultIDBuckets
	if v, ok := userConfig[UserConfigIDBuckets]; ok {
		n, err := ParseBuckets(v)
		if err != nil {
			return nil, err
		}
		buckets = n
	}
	return New(field, buckets).Stateful, nil
}

// ParseBuckets reads an idBuckets user config value (confnum.Number): a
// whole number from 1 to MaxIDBuckets.
func ParseBuckets(v any) (int, error) {
	n, err := confnum.Number(v)
	if err != nil || n < 1 || n > MaxIDBuckets || n != math.Trunc(n) {
		return 0, fmt.Errorf("%s %v: want a whole number from 1 to %d", UserConfigIDBuckets, v, MaxIDBuckets)
	}
	return int(n), nil
}

// decoder reads an event's id from field; it never fails: an event
// without a readable id passes on.
func decoder(field string) transform.Decoder[Event] {
	names := []string{field}
	return func(payload []byte) (Event, error) {
		ev := Event{Payload: payload}
		var member [1]json.RawMessage
		if !jsonwire.Members(payload, names, member[:]) {
			var fields map[string]json.RawMessage
			if json.Unmarshal(payload, &fields) != nil {
				return ev, nil
			}
			member[0] = fields[field]
		}
		ev.ID = IDOf(member[0])
		return ev, nil
	}
}

// IDOf returns the id an event's id member holds: a string's value, or a
// number as written; "" for anything else (missing, null, another type),
// which no event is told apart by. Producers (package client) read ids
// with it too, so that what they refuse as having no id is what this
// stage would pass on unchecked.
func IDOf(member json.RawMessage) string {
	if s, ok := jsonwire.PlainString(member); ok {
		return s
	}
	var s string
	var n json.Number
	switch {
	case len(member) == 0:
	case json.Unmarshal(member, &s) == nil:
		return s
	case json.Unmarshal(member, &n) == nil:
		return n.String()
	}
	return ""
}

// distinct passes an event on the first time its id comes under its key.
func distinct(state State, in transform.Input[Event]) (State, []transform.Output, error) {
	e := in.Event
	pass := []transform.Output{transform.EmitBytes("", e.Payload)}
	if e.ID == "" {
		return state, pass, nil
	}
	next := state.Add(e.ID)
	if next.Len() == state.Len() {
		return state, nil, nil // seen before
	}
	return next, pass, nil
}
