package jsonwire

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

var samples = []string{"", "plain", "\"\\/\b\f\n\r\t\x00\x1f\x7f", "<a&b>", "é😀", "\u2028\u2029", "\xff", "a\xe2\x80", "\xed\xa0\x80", " ", "1", "true", "null", "-0.5e+3", "01", "{}", "[1]", `"x"`}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range samples {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("p"), s); string(got) != "p"+string(want) {
			t.Errorf("AppendString(%q) = %s, want p%s", s, got, want)
		}
	}
}

func TestCanonical(t *testing.T) {
	for _, s := range append(samples, "1 ", " 1", `"<"`, `"\u003c"`, "\"\u2028\"", "1.", "-", "nul", "truex", `"a" "b"`) {
		got := Canonical([]byte(s))
		out, err := json.Marshal(json.RawMessage(s))
		want := err == nil && string(out) == s && s != "" && s[0] != '{' && s[0] != '['
		if got != want {
			t.Errorf("Canonical(%q) = %v, want %v (json.Marshal: %s, %v)", s, got, want, out, err)
		}
	}
}

// numberSamples are JSON texts around the edges of Int.
var numberSamples = []string{"0", "-0", "7", " 42 ", "-17", "1.5", "1e3", "1E3", "-", "01", "+1", "999999999999999999", "-999999999999999999",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "12345678901234567890", "1 2", "\"5\"", "null", ""}

// TestPlainStringAndIntAgreeWithUnmarshal checks that where PlainString and
// Int answer, encoding/json answers the same.
func TestPlainStringAndIntAgreeWithUnmarshal(t *testing.T) {
	for _, s := range append(append([]string{}, samples...), numberSamples...) {
		for _, raw := range []string{s, mustMarshal(t, s)} {
			agreesWithUnmarshal(t, raw)
		}
	}
	for raw, want := range map[string]bool{`"plain"`: true, ` "é" `: true, `"a\nb"`: false, `"\xff"`: false, `"a" "b"`: false, `5`: false} {
		if _, ok := PlainString([]byte(raw)); ok != want {
			t.Errorf("PlainString(%q) answers %v, want %v", raw, ok, want)
		}
	}
	for raw, want := range map[string]bool{"-17": true, " 42 ": true, "999999999999999999": true, "1.5": false, "1e3": false, "01": false, "9223372036854775807": false} {
		if _, ok := Int([]byte(raw)); ok != want {
			t.Errorf("Int(%q) answers %v, want %v", raw, ok, want)
		}
	}
}

func FuzzPlainStringAndInt(f *testing.F) {
	for _, s := range append(append([]string{}, samples...), numberSamples...) {
		f.Add(s)
	}
	f.Fuzz(agreesWithUnmarshal)
}

// agreesWithUnmarshal checks that where PlainString and Int answer for raw,
// encoding/json answers the same.
func agreesWithUnmarshal(t *testing.T, raw string) {
	if got, ok := PlainString([]byte(raw)); ok {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil || got != want {
			t.Errorf("PlainString(%q) = %q; encoding/json: %q, %v", raw, got, want, err)
		}
	}
	if got, ok := Int([]byte(raw)); ok {
		var want int64
		if err := json.Unmarshal([]byte(raw), &want); err != nil || got != want {
			t.Errorf("Int(%q) = %d; encoding/json: %d, %v", raw, got, want, err)
		}
	}
}

func mustMarshal(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The eight-byte tests agree with the byte tables on every byte value at
// every place among plain neighbours, and on random words.
func TestWordTestsAgreeWithTables(t *testing.T) {
	check := func(w [8]byte) {
		plain, safe := true, true
		for _, c := range w {
			plain = plain && plainASCII[c]
			safe = safe && c < utf8.RuneSelf && safeSet[c]
		}
		x := binary.LittleEndian.Uint64(w[:])
		if plainWord(x) != plain || safeWord(x) != safe || safeWord(word8(string(w[:]), 0)) != safe {
			t.Fatalf("%q: plainWord %v safeWord %v, want %v %v", w, plainWord(x), safeWord(x), plain, safe)
		}
	}
	for place := range 8 {
		for c := range 256 {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[place] = byte(c)
			check(w)
			w[(place+3)%8] = 0xff
			check(w)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		check(w)
		for i := range w { // mostly printable ASCII, as real strings are
			if rng.IntN(4) > 0 {
				w[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		check(w)
	}
}

// Strings longer than a word, with the byte to escape or stop at anywhere.
func TestLongStrings(t *testing.T) {
	for _, special := range []string{`"`, `\\`, "<", ">", "&", "\n", "\x00", "é", "\u2028", "\xff"} {
		for n := range 20 {
			s := strings.Repeat("x", n) + special + strings.Repeat("y", 19-n)
			want, _ := json.Marshal(s)
			if got := AppendString(nil, s); string(got) != string(want) {
				t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
			}
			r := NewReader(want)
			tok, plain := r.String()
			if !r.Done() || string(tok) != string(want) {
				t.Errorf("reading %s: token %s", want, tok)
			}
			if wantPlain := !strings.ContainsAny(string(want[1:len(want)-1]), `\`); plain != wantPlain {
				t.Errorf("reading %s: plain %v, want %v", want, plain, wantPlain)
			}
		}
	}
}
