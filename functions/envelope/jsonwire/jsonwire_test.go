package jsonwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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

// Strings with the byte to escape or stop at anywhere.
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

// NextKeyIs takes a member only when NextKey would read that name, and
// otherwise leaves the reader as it was; it takes the canonical spelling.
func TestNextKeyIs(t *testing.T) {
	objects := []string{`{"a":1,"bb":2}`, `{ "a":1}`, `{"a" :1}`, `{"a":1 ,"bb":2}`, `{"\u0061":1}`, `{"a":1,"a":2}`,
		`{"ab":1}`, `{"a`, `{"a"`, `{"a":`, `{}`, `{"a":1,}`, `{"bb":{"a":1},"a":[]}`}
	for _, obj := range objects {
		for _, guess := range []string{"a", "bb", "ab"} {
			want, got := NewReader([]byte(obj)), NewReader([]byte(obj))
			want.Object()
			got.Object()
			for step := 0; ; step++ {
				name, _, more := want.NextKey()
				if got.NextKeyIs(guess) {
					if !more || string(name) != guess {
						t.Fatalf("%s: NextKeyIs(%q) took a member NextKey reads as %q, %v", obj, guess, name, more)
					}
				} else if gotName, _, gotMore := got.NextKey(); string(gotName) != string(name) || gotMore != more {
					t.Fatalf("%s: after NextKeyIs(%q) refused, NextKey reads %q, %v; want %q, %v", obj, guess, gotName, gotMore, name, more)
				}
				if !more {
					break
				}
				want.Skip()
				got.Skip()
				if want.pos != got.pos || want.failed != got.failed {
					t.Fatalf("%s, guessing %q: readers apart at step %d", obj, guess, step)
				}
			}
		}
	}
	r := NewReader([]byte(`{"a":1,"bb":2}`))
	r.Object()
	if !r.NextKeyIs("a") || r.Raw() == nil || r.NextKeyIs("a") || !r.NextKeyIs("bb") {
		t.Errorf("NextKeyIs refused a canonical member of %s", r.data)
	}
}

// TestMembersAgreesWithUnmarshal checks that whatever Members reads, it
// reads as encoding/json's map does, and that it reads the common forms.
func TestMembersAgreesWithUnmarshal(t *testing.T) {
	names := []string{"id", "user", "time"}
	inputs := []string{
		`{"id":"e-1","type":"page_view","user":"u1","time":"2026-11-01T00:00:00Z","url":"/a"}`,
		` { "user" : "u2" , "id" : 42 , "nested" : {"id":"inner","a":[1,{"user":"x"}]} } `,
		`{"id":"a","id":"b"}`,
		`{"id":null,"user":7,"time":{"x":1}}`,
		`{"i\u0064":"escaped name"}`,
		`{"id":"e-1",}`,
		`{"id":"e-1"} trailing`,
		`[1,2]`,
		`"id"`,
		`{}`,
		`{"id":"\u00e9"}`,
	}
	for _, in := range inputs {
		var got [3]json.RawMessage
		ok := Members([]byte(in), names, got[:])
		var m map[string]json.RawMessage
		err := json.Unmarshal([]byte(in), &m)
		if !ok {
			continue // left to encoding/json
		}
		if err != nil {
			t.Errorf("Members read %s, which encoding/json refuses: %v", in, err)
			continue
		}
		for i, name := range names {
			if string(got[i]) != string(bytes.TrimSpace(m[name])) {
				t.Errorf("%s: member %s = %s, encoding/json %s", in, name, got[i], m[name])
			}
		}
	}
	var got [3]json.RawMessage
	if !Members([]byte(inputs[0]), names, got[:]) || string(got[0]) != `"e-1"` {
		t.Errorf("Members of a shop event: %q", got)
	}
}
