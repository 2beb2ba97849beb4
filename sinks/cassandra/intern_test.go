package cassandra

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestInternerForgetsAllWhenFull(t *testing.T) {
	in := newInterner[string]()
	in.limit = 2
	in.store([]byte("a"), "A")
	in.store([]byte("b"), "B")
	if v, ok := in.lookup([]byte("a")); !ok || v != "A" {
		t.Fatalf("lookup(a) = %q, %v", v, ok)
	}
	in.store([]byte("c"), "C") // full: forgets a and b
	if _, ok := in.lookup([]byte("a")); ok {
		t.Error("a is still remembered past the limit")
	}
	if v, ok := in.lookup([]byte("c")); !ok || v != "C" {
		t.Errorf("lookup(c) = %q, %v", v, ok)
	}
	long := make([]byte, internMaxBytes+1)
	in.store(long, "long")
	if _, ok := in.lookup(long); ok {
		t.Error("a value longer than internMaxBytes was interned")
	}
}

// TestTextDecodeInterned: a text value decoded again from the interner is
// the value decoded the first time, and an invalid one is refused every
// time.
func TestTextDecodeInterned(t *testing.T) {
	for _, name := range []string{"text", "ascii"} {
		typ, _ := lookupType(name)
		for _, raw := range []string{`"u42"`, `"a\"b"`, `"\u00e9"`, `"é"`, `5`, `"\ud800"`} {
			first, err1 := typ.decode(json.RawMessage(raw))
			again, err2 := typ.decode(json.RawMessage(raw))
			if first != again || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Errorf("%s %s: %#v, %v then %#v, %v", name, raw, first, err1, again, err2)
			}
			if err2 != nil && !errors.Is(err2, ErrBadValue) {
				t.Errorf("%s %s: error %v is not ErrBadValue", name, raw, err2)
			}
		}
	}
}

func TestKeyStringMatchesQuotedSprint(t *testing.T) {
	for _, key := range [][]any{{"u42"}, {"a\"b", int64(-7)}, {int64(1 << 40)}, {true, 1.5}, {"é\x00"}} {
		want := ""
		for _, v := range key {
			want += fmt.Sprintf("%q,", fmt.Sprint(v))
		}
		for range 2 { // built, then interned
			if got := keyString(key); got != want {
				t.Errorf("keyString(%#v) = %s, want %s", key, got, want)
			}
		}
	}
}
