package dedup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/foldline/foldline/functions/dedup"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

func msg(key, payload string, entry int64) transform.Message {
	return transform.Message{Key: key, Payload: []byte(payload), Origin: envelope.Origin{
		Topic: "persistent://shop/ledger/events", Position: envelope.Position{Ledger: 3, Entry: entry},
	}}
}

func TestContract(t *testing.T) {
	transformtest.RunStatefulPassing(t, dedup.New("id", dedup.DefaultIDBuckets),
		msg("u1", `{"id":"e-1","user":"u1"}`, 1),
		msg("u1", `{"id":"e-2","user":"u1"}`, 2),
		msg("u2", `{"id":"e-1","user":"u2"}`, 3),
		msg("u1", `{"id":"e-1","user":"u1","again":true}`, 4),
		msg("u1", `not json`, 5),
	)
	transformtest.StateRoundTrips(t, dedup.StateOf("e-1", "e-\u2028"))
}

// TestDistinct folds a stream through the stage, one process: what passes.
func TestDistinct(t *testing.T) {
	tests := []struct {
		name  string
		field string
		in    []transform.Message
		want  []string // payloads passed on, in order
	}{
		{name: "an id seen under its key is dropped", field: "id",
			in:   []transform.Message{msg("u1", `{"id":"a"}`, 1), msg("u1", `{"id":"b"}`, 2), msg("u1", `{"id":"a","x":1}`, 3)},
			want: []string{`{"id":"a"}`, `{"id":"b"}`}},
		{name: "the same id under another key is another event", field: "id",
			in:   []transform.Message{msg("u1", `{"id":"a"}`, 1), msg("u2", `{"id":"a"}`, 2)},
			want: []string{`{"id":"a"}`, `{"id":"a"}`}},
		{name: "numbers are ids too", field: "id",
			in:   []transform.Message{msg("u1", `{"id":42}`, 1), msg("u1", `{"id":42.0}`, 2), msg("u1", `{"id":42}`, 3)},
			want: []string{`{"id":42}`, `{"id":42.0}`}},
		{name: "no id passes on for the next stage to judge", field: "id",
			in:   []transform.Message{msg("", `[1]`, 1), msg("", `[1]`, 2), msg("u1", `{"ID":"a"}`, 3), msg("u1", `{"id":null}`, 4), msg("u1", `{"id":["a"]}`, 5)},
			want: []string{`[1]`, `[1]`, `{"ID":"a"}`, `{"id":null}`, `{"id":["a"]}`}},
		{name: "another field", field: "event_id",
			in:   []transform.Message{msg("u1", `{"event_id":"a","id":"1"}`, 1), msg("u1", `{"event_id":"a","id":"2"}`, 2)},
			want: []string{`{"event_id":"a","id":"1"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := dedup.Transformation.Configure(map[string]any{dedup.UserConfigIDField: tt.field})
			if err != nil {
				t.Fatal(err)
			}
			if _, again := p.(transform.Configurable); again {
				t.Fatal("Configure returned a transformation to configure again")
			}
			kp := p.(transform.KeyedProcessor)
			store := keyed.New(keyed.NewMemory(), kp.StateCodec(), keyed.Options{Inline: true})
			var got []string
			for _, m := range tt.in {
				recs, txn, err := kp.ProcessKeyed(context.Background(), store, m)
				if err != nil {
					t.Fatalf("%s: %v", m.Payload, err)
				}
				txn.Settle(func(error) {})
				for _, r := range recs {
					if r.Key != m.Key || r.Origin != m.Origin {
						t.Errorf("passed on as key %q origin %v, want the input's", r.Key, r.Origin)
					}
					got = append(got, string(r.Payload))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("passed on %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBuckets: a key's ids spread over its buckets, each a state of its
// own that holds only its ids; a bucket of one is the message key's one
// state; ids are still recognised whatever their bucket.
func TestBuckets(t *testing.T) {
	for _, buckets := range []int{1, 4, dedup.DefaultIDBuckets} {
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			kp := dedup.New("id", buckets).Stateful
			memory := keyed.NewMemory()
			store := keyed.New(memory, kp.StateCodec(), keyed.Options{Inline: true})
			passed := 0
			for round := range 2 {
				for i := range 40 {
					m := msg("u1", fmt.Sprintf(`{"id":"e-%d"}`, i), int64(round*40+i))
					recs, txn, err := kp.ProcessKeyed(context.Background(), store, m)
					if err != nil {
						t.Fatal(err)
					}
					txn.Settle(func(error) {})
					passed += len(recs)
				}
			}
			if passed != 40 {
				t.Errorf("%d events passed, want the 40 distinct ids once", passed)
			}
			store.Close()
			snaps := memory.Snapshots()
			want := map[string]int{} // state key → ids
			for i := range 40 {
				key := "u1"
				if buckets > 1 {
					key = dedup.StateKey("u1", dedup.BucketOf(fmt.Sprintf("e-%d", i), buckets))
				}
				want[key]++
			}
			if len(snaps) != len(want) {
				t.Errorf("%d states, want %d (the buckets the ids fall in)", len(snaps), len(want))
			}
			for key, n := range want {
				state, err := kp.StateCodec().Decode(snaps[key].State)
				if err != nil {
					t.Fatalf("state %q: %v", key, err)
				}
				if got := state.(dedup.State).Len(); got != n {
					t.Errorf("state %q holds %d ids, want %d", key, got, n)
				}
			}
		})
	}
	if dedup.StateKey("a#001", 2) == dedup.StateKey("a", 0x1002) || dedup.StateKey("u", 10) != "u#00a" {
		t.Error("state keys of two (key, bucket) pairs collide, or are not the key and three hex digits")
	}
}

// TestStateJSON: the ids as a sorted array, read back with any id, by
// encoding/json and by the state codec (which writes it without
// encoding/json); an array in another order or with an id twice, and the
// object of ids that states were saved as before, read back sorted, each
// id once. Add keeps the ids sorted and each once.
func TestStateJSON(t *testing.T) {
	var state dedup.State
	for _, id := range []string{"é", "b", "\x00", "a\"<\u2028", "b"} {
		state = state.Add(id)
	}
	ids := []string{"\x00", "a\"<\u2028", "b", "é"}
	if !slices.Equal(state.IDs(), ids) || !state.Has("b") || state.Has("c") {
		t.Fatalf("after Add: %q, want %q", state.IDs(), ids)
	}
	data, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ids":["\u0000","a\"\u003c\u2028","b","é"]}`; string(data) != want {
		t.Errorf("encoded %s, want %s", data, want)
	}
	codec := keyed.JSON[dedup.State]()
	raw, err := codec.Encode(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{string(data), string(raw), `{"ids":["é","b","\u0000","b","a\"\u003c\u2028"]}`, `{"ids":{"\u0000":true,"a\"\u003c\u2028":true,"b":true,"é":true}}`} {
		var back dedup.State
		if err := json.Unmarshal([]byte(in), &back); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !slices.Equal(back.IDs(), ids) {
			t.Errorf("%s read back as %q, want %q", in, back.IDs(), ids)
		}
		decoded, err := codec.Decode([]byte(in))
		if err != nil || !slices.Equal(decoded.(dedup.State).IDs(), ids) {
			t.Errorf("%s decoded by the codec as %v (%v), want %q", in, decoded, err, ids)
		}
	}
	if data, _ := json.Marshal(dedup.State{}); string(data) != "{}" {
		t.Errorf("no ids encoded as %s, want {}", data)
	}
	var bad dedup.State
	if err := json.Unmarshal([]byte(`{"ids":[1]}`), &bad); err == nil {
		t.Error("ids of numbers read without an error")
	}
}

// TestStateNeverChanges: Add leaves the state it is called on as it was
// (a keyed.ImmutableState, which the store keeps without encoding it),
// across the rebuilds of its base; each state holds exactly the ids added
// before it, and encodes as the same ids sorted in one slice do.
func TestStateNeverChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var state dedup.State
	var kept []dedup.State
	var encodings []string
	seen := map[string]bool{}
	for i := range 5000 {
		id := fmt.Sprintf("e-%d", rng.IntN(4000))
		if state.Has(id) != seen[id] {
			t.Fatalf("input %d: Has(%s) = %v, want %v", i, id, state.Has(id), seen[id])
		}
		seen[id] = true
		state = state.Add(id)
		if i%37 == 0 {
			kept = append(kept, state)
			encodings = append(encodings, string(state.AppendJSON(nil)))
		}
	}
	for i, st := range kept {
		if got := string(st.AppendJSON(nil)); got != encodings[i] {
			t.Fatalf("state %d changed after later Adds", i)
		}
	}
	want := slices.Sorted(maps.Keys(seen))
	if !slices.Equal(state.IDs(), want) || state.Len() != len(want) {
		t.Fatalf("%d ids, want %d", state.Len(), len(want))
	}
	if got, one := string(state.AppendJSON(nil)), string(dedup.StateOf(want...).AppendJSON(nil)); got != one {
		t.Fatalf("encoded as %.80s…, want %.80s…", got, one)
	}
}

func TestConfigure(t *testing.T) {
	for _, bad := range []any{0.0, -1.0, 2.5, 4097.0, "x", true} {
		if _, err := dedup.Transformation.Configure(map[string]any{dedup.UserConfigIDBuckets: bad}); err == nil || !strings.Contains(err.Error(), "idBuckets") {
			t.Errorf("idBuckets %v: %v", bad, err)
		}
	}
	for _, good := range []any{1.0, 64.0, "256", 4096} {
		if _, err := dedup.Transformation.Configure(map[string]any{dedup.UserConfigIDBuckets: good}); err != nil {
			t.Errorf("idBuckets %v: %v", good, err)
		}
	}
	if _, err := dedup.Transformation.Configure(map[string]any{dedup.UserConfigIDField: 3.0}); err == nil || !strings.Contains(err.Error(), "eventIdField") {
		t.Errorf("a number as the id field: %v", err)
	}
	if _, err := dedup.Transformation.Configure(nil); err != nil {
		t.Errorf("no user config: %v", err)
	}
}

// BenchmarkStateEncode encodes a bucket of 80 ids as every input does
// (the state codec), against encoding/json's own encoding of the same ids
// as a map (the state's encoding before it kept them sorted), in the same
// run:
//
//	go test -run '^$' -bench StateEncode -benchmem ./functions/dedup/
func BenchmarkStateEncode(b *testing.B) {
	var state dedup.State
	ids := map[string]bool{}
	for i := range 80 {
		id := fmt.Sprintf("e-%08d", i*7919)
		state, ids[id] = state.Add(id), true
	}
	codec := keyed.JSON[dedup.State]()
	b.Run("state", func(b *testing.B) {
		for b.Loop() {
			if _, err := codec.Encode(state); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-map", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(struct {
				IDs map[string]bool `json:"ids"`
			}{ids}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBucketOfIsFNV1a pins the buckets to FNV-1a (hash/fnv), which they
// must never leave: a seen id would be looked for elsewhere.
func TestBucketOfIsFNV1a(t *testing.T) {
	for _, id := range []string{"", "e-1", "ord-000042", "é\u2028"} {
		h := fnv.New32a()
		h.Write([]byte(id))
		for _, buckets := range []int{1, 16, 64, 4096} {
			if got, want := dedup.BucketOf(id, buckets), int(h.Sum32()%uint32(buckets)); got != want {
				t.Errorf("BucketOf(%q, %d) = %d, want FNV-1a's %d", id, buckets, got, want)
			}
		}
	}
}
