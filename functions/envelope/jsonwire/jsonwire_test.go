package jsonwire

import (
	"encoding/json"
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
