// Package transformtest is the contract suite that every Foldline
// transformation passes by calling Run from its test:
//
//   - determinism: the same input gives the same records (or the same error
//     text) in the same order, whatever ran before it, across repeated calls
//     and in a fresh process (the test binary re-runs the calling test in a
//     child process and the outputs are compared byte for byte), which
//     catches hidden clocks, randomness, global state and map-order leaks;
//   - malformed input gives an error, never a panic: empty and blank
//     payloads, JSON that is not an object, every kind of truncation of the
//     given inputs, random bytes from a fixed seed; and inputs whose fields
//     are removed, nulled or given a wrong type must not panic either;
//   - every output keeps its input's origin position, refined by its index
//     when the input caused several (so that a sink tells them apart);
//   - ProcessOps (when the Processor has it, as every Transformation does)
//     returns the same records as Process, each view operation as the
//     operation that Process's payload decodes to, or the same error.
//
// It assumes events are JSON objects, as all Foldline ledger events are.
package transformtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
)

// childEnv names the folder where a child process, re-running the calling
// test, writes what the transformation returned.
const childEnv = "FOLDLINE_TRANSFORMTEST_CHILD_DIR"

// syntheticTopic is the origin topic given to inputs that carry none.
const syntheticTopic = "persistent://transformtest/contract/ledger-partition-0"

// Run checks the contract for p. inputs should be valid events that produce
// outputs (at least one must); the suite derives the malformed ones. Inputs
// without an origin get distinct synthetic origins.
func Run(t *testing.T, p transform.Processor, inputs ...transform.Message) {
	t.Helper()
	inputs = withOrigins(inputs, 0)
	corpus := append(append([]transform.Message(nil), inputs...), mustFail(inputs)...)
	corpus = append(corpus, mustNotPanic(inputs)...)
	corpus = withOrigins(corpus, len(inputs))

	if dir := os.Getenv(childEnv); dir != "" {
		writeChildResults(t, dir, p, corpus)
		return
	}

	first := runAll(t, p, corpus)
	t.Run("no panic", func(t *testing.T) {
		for i, r := range first {
			if r.Panic != "" {
				t.Errorf("input %s panicked: %s", describe(corpus[i]), r.Panic)
			}
		}
	})
	t.Run("outputs", func(t *testing.T) {
		produced := 0
		for i := range inputs {
			if first[i].Err != "" {
				t.Errorf("valid input %s: %s", describe(inputs[i]), first[i].Err)
			}
			produced += len(first[i].Records)
		}
		if produced == 0 {
			t.Errorf("no input produced an output: give Run at least one event that does")
		}
	})
	t.Run("malformed input is an error", func(t *testing.T) {
		bad := mustFail(inputs)
		for i := range bad {
			r := first[len(inputs)+i]
			if r.Panic == "" && r.Err == "" {
				t.Errorf("malformed input %s gave no error but %d outputs", describe(bad[i]), len(r.Records))
			}
		}
	})
	t.Run("origin kept", func(t *testing.T) {
		for i, r := range first {
			for j, rec := range r.Records {
				if want := corpus[i].Origin.Child(j, len(r.Records)); rec.Origin != want {
					t.Errorf("input %s: output %d has origin %+v, want %+v (the input's, refined by the output's index when there are several)", describe(corpus[i]), j, rec.Origin, want)
				}
			}
		}
	})
	t.Run("outputs of one input are told apart", func(t *testing.T) {
		// A sink skips an operation at or before a row's last applied
		// position as a redelivery: two operations of one input on one row
		// must have distinct, increasing positions, or the second is lost.
		for i, r := range first {
			for j := 1; j < len(r.Records); j++ {
				a, b := r.Records[j-1].Origin, r.Records[j].Origin
				if a.Topic != b.Topic || a.Position.Compare(b.Position) >= 0 {
					t.Errorf("input %s: output %d (origin %s %s) does not come after output %d (%s %s)", describe(corpus[i]), j, b.Topic, b.Position, j-1, a.Topic, a.Position)
				}
			}
		}
	})
	if ops, ok := p.(OpsProcessor); ok {
		t.Run("ProcessOps hands over what Process encodes", func(t *testing.T) {
			for i, m := range corpus {
				if first[i].Panic == "" {
					compareOps(t, m, first[i], ops)
				}
			}
		})
	}
	t.Run("deterministic", func(t *testing.T) {
		// Reversed order: an output that depends on what ran before differs.
		reversed := make([]result, len(corpus))
		for i := len(corpus) - 1; i >= 0; i-- {
			reversed[i] = call(p, corpus[i])
		}
		again := runAll(t, p, corpus)
		for i := range corpus {
			compare(t, "a repeated call", corpus[i], first[i], again[i])
			compare(t, "a call in reverse order", corpus[i], first[i], reversed[i])
		}
		fresh, err := runInChild(t)
		if err != nil {
			t.Fatalf("running the test again in a fresh process: %v", err)
		}
		if len(fresh) != len(corpus) {
			t.Fatalf("fresh process returned %d results for %d inputs", len(fresh), len(corpus))
		}
		for i := range corpus {
			compare(t, "a fresh process", corpus[i], first[i], fresh[i])
		}
	})
}

// OpsProcessor is a Processor that can also hand its view operations over
// unencoded, as transform.Transformation does.
type OpsProcessor interface {
	transform.Processor
	ProcessOps(transform.Message) ([]transform.Record, error)
}

// CheckProcessOps checks, for each input, that ProcessOps returns what
// Process returns: the same error text, or the same records, each view
// operation as the operation that Process's payload decodes to. Run does
// this over its corpus; call it for inputs that Run's other checks do not
// suit (outputs that fail on purpose, times from a clock).
func CheckProcessOps(t testing.TB, p OpsProcessor, inputs ...transform.Message) {
	t.Helper()
	for _, m := range inputs {
		want := call(p, m)
		if want.Panic != "" {
			t.Errorf("input %s: Process panicked: %s", describe(m), want.Panic)
			continue
		}
		compareOps(t, m, want, p)
	}
}

// compareOps checks that ProcessOps returns for m what Process returned
// (want): the same error text, or the same records, each view operation
// as the operation that Process's payload decodes to.
func compareOps(t testing.TB, m transform.Message, want result, p OpsProcessor) {
	t.Helper()
	recs, err := p.ProcessOps(m)
	if err != nil || want.Err != "" {
		if err == nil || err.Error() != want.Err {
			t.Errorf("input %s: ProcessOps returned error %v, Process %q", describe(m), err, want.Err)
		}
		return
	}
	if len(recs) != len(want.Records) {
		t.Errorf("input %s: ProcessOps returned %d records, Process %d", describe(m), len(recs), len(want.Records))
		return
	}
	for j, got := range recs {
		w := want.Records[j]
		if got.Key != w.Key || !got.EventTime.Equal(w.EventTime) || got.Origin != w.Origin {
			t.Errorf("input %s: record %d of ProcessOps has key %q, time %v, origin %+v; Process's %q, %v, %+v", describe(m), j, got.Key, got.EventTime, got.Origin, w.Key, w.EventTime, w.Origin)
		}
		if got.Op == nil {
			if !bytes.Equal(got.Payload, w.Payload) {
				t.Errorf("input %s: record %d of ProcessOps has payload %s, Process's %s", describe(m), j, got.Payload, w.Payload)
			}
			continue
		}
		decoded, err := envelope.DecodeRowOp(w.Payload)
		if err != nil {
			t.Errorf("input %s: record %d: ProcessOps handed over a view operation, but Process's payload is none: %v", describe(m), j, err)
			continue
		}
		if !sameOp(*got.Op, decoded) || got.Payload != nil {
			t.Errorf("input %s: record %d of ProcessOps is the operation %+v (payload %q), Process's decodes to %+v", describe(m), j, *got.Op, got.Payload, decoded)
		}
	}
}

// sameOp compares two view operations as a sink reads them: the event
// time as an instant, an empty key or column list as none.
func sameOp(a, b envelope.RowOp) bool {
	if !a.EventTime.Equal(b.EventTime) {
		return false
	}
	a.EventTime, b.EventTime = time.Time{}, time.Time{}
	for _, op := range []*envelope.RowOp{&a, &b} {
		if len(op.Key) == 0 {
			op.Key = nil
		}
		if len(op.Columns) == 0 {
			op.Columns = nil
		}
	}
	return reflect.DeepEqual(a, b)
}

// result is what one Process call returned, in a form that compares and
// travels between processes.
type result struct {
	Records []transform.Record `json:"records,omitempty"`
	Err     string             `json:"err,omitempty"`
	Panic   string             `json:"panic,omitempty"`
}

func call(p transform.Processor, m transform.Message) (r result) {
	defer func() {
		if v := recover(); v != nil {
			r = result{Panic: fmt.Sprintf("%v\n%s", v, debug.Stack())}
		}
	}()
	recs, err := p.Process(m)
	if err != nil {
		return result{Err: err.Error()}
	}
	return result{Records: recs}
}

func runAll(t *testing.T, p transform.Processor, corpus []transform.Message) []result {
	t.Helper()
	out := make([]result, len(corpus))
	for i, m := range corpus {
		out[i] = call(p, m)
	}
	return out
}

func compare(t *testing.T, how string, m transform.Message, want, got result) {
	t.Helper()
	if want.Panic != "" || got.Panic != "" {
		return // reported by "no panic"
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Errorf("input %s: %s returned\n\t%s\nbut the first call returned\n\t%s", describe(m), how, g, w)
	}
}

func describe(m transform.Message) string {
	const max = 120
	s := strconv.Quote(string(m.Payload))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%s (key %q, origin %s)", s, m.Key, m.Origin.Position)
}

func withOrigins(ms []transform.Message, offset int) []transform.Message {
	out := make([]transform.Message, len(ms))
	for i, m := range ms {
		if m.Origin.IsZero() {
			m.Origin = envelope.Origin{Topic: syntheticTopic, Position: envelope.Position{Ledger: 7, Entry: int64(offset + i)}}
		}
		out[i] = m
	}
	return out
}

// mustFail derives inputs that are not events at all.
func mustFail(inputs []transform.Message) []transform.Message {
	key := "k"
	if len(inputs) > 0 {
		key = inputs[0].Key
	}
	var payloads [][]byte
	for _, s := range []string{"", " ", "\n", "null", "[]", "[1,2]", `"text"`, "42", "-1", "true", "{", "}", "{]", `{"`, `{"a":}`, `{"a" 1}`, "\x00\x01\x02", "\xff\xfe\xfd"} {
		payloads = append(payloads, []byte(s))
	}
	// Truncations of the inputs: no strict prefix of a JSON object is JSON.
	for _, m := range limit(inputs, 20) {
		body := bytes.TrimSpace(m.Payload)
		if len(body) < 2 || body[0] != '{' {
			continue
		}
		for _, cut := range cuts(len(body), 16) {
			payloads = append(payloads, bytes.Clone(body[:cut]))
		}
	}
	// Random bytes from a fixed seed, so every run feeds the same garbage.
	rng := rand.New(rand.NewPCG(0xf01d, 0x11e))
	for range 32 {
		b := make([]byte, 1+rng.IntN(256))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[0] = 0xff // never a JSON value's first byte
		payloads = append(payloads, b)
	}
	out := make([]transform.Message, len(payloads))
	for i, b := range payloads {
		out[i] = transform.Message{Key: key, Payload: b}
	}
	return out
}

// mustNotPanic derives inputs whose fields are removed or wrongly typed: a
// transformation may accept some of them, but must not panic on any.
func mustNotPanic(inputs []transform.Message) []transform.Message {
	replacements := []string{"null", "0", "-1", "1.5", "1e999", `""`, `"x"`, `"2026-13-45T99:99:99Z"`, "{}", "[]", "true"}
	var out []transform.Message
	for _, m := range limit(inputs, 10) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(m.Payload, &fields) != nil || fields == nil {
			continue
		}
		// Sorted, so that the child process derives the same corpus.
		for _, field := range slices.Sorted(maps.Keys(fields)) {
			variants := []map[string]json.RawMessage{without(fields, field)}
			for _, r := range replacements {
				v := without(fields, field)
				v[field] = json.RawMessage(r)
				variants = append(variants, v)
			}
			for _, v := range variants {
				b, err := json.Marshal(v)
				if err != nil {
					continue
				}
				out = append(out, transform.Message{Key: m.Key, EventTime: m.EventTime, Payload: b})
			}
		}
	}
	return out
}

func without(fields map[string]json.RawMessage, field string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		if k != field {
			out[k] = v
		}
	}
	return out
}

func limit(ms []transform.Message, n int) []transform.Message {
	return ms[:min(n, len(ms))]
}

// cuts returns up to n distinct lengths in [1, size) spread over the range.
func cuts(size, n int) []int {
	var out []int
	last := 0
	for i := 1; i <= n; i++ {
		c := i * (size - 1) / n
		if c > last {
			out = append(out, c)
			last = c
		}
	}
	return out
}

// The fresh-process check: the parent re-runs exactly the calling test in a
// child; Run in the child only records its results. Several Run calls in one
// test are told apart by their order, which is the same in both processes.
var (
	callsMu sync.Mutex
	calls   = map[string]int{}
)

func nextResultsFile(t *testing.T) string {
	callsMu.Lock()
	defer callsMu.Unlock()
	n := calls[t.Name()]
	calls[t.Name()] = n + 1
	return resultsFile(t.Name(), n)
}

// resultsFile names the file of the n-th Run call of a test.
func resultsFile(test string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(test))
	return fmt.Sprintf("%x-%d.json", h.Sum64(), n)
}

func writeChildResults(t *testing.T, dir string, p transform.Processor, corpus []transform.Message) {
	t.Helper()
	b, err := json.Marshal(runAll(t, p, corpus))
	if err != nil {
		t.Fatalf("encoding results: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, nextResultsFile(t)), b, 0o644); err != nil {
		t.Fatalf("writing results: %v", err)
	}
}

// runInChild must be called from a subtest of the test that called Run, so
// the id is taken from the parent's name.
func runInChild(t *testing.T) ([]result, error) {
	parent := t.Name()[:strings.LastIndex(t.Name(), "/")]
	dir := t.TempDir()
	elems := strings.Split(parent, "/")
	for i, e := range elems {
		elems[i] = "^" + regexp.QuoteMeta(e) + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+strings.Join(elems, "/"), "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("running %s: %w\n%s", cmd, err, out)
	}
	callsMu.Lock()
	n := calls[parent]
	calls[parent] = n + 1
	callsMu.Unlock()
	b, err := os.ReadFile(filepath.Join(dir, resultsFile(parent, n)))
	if err != nil {
		return nil, fmt.Errorf("reading the child's results: %w", err)
	}
	var out []result
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decoding the child's results: %w", err)
	}
	return out, nil
}
