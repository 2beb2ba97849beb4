package textcap

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{name: "short text unchanged", in: "boom", max: 10, want: "boom"},
		{name: "invalid UTF-8 replaced", in: "a\xffb", max: 10, want: "a\uFFFDb"},
		{name: "cut at the limit with a marker", in: strings.Repeat("x", 100), max: 40,
			want: strings.Repeat("x", 10) + "… [truncated from 100 bytes]"},
		{name: "never cuts a rune", in: strings.Repeat("é", 50), max: 41,
			want: strings.Repeat("é", 5) + "… [truncated from 100 bytes]"},
		{name: "a limit below the marker keeps the marker alone", in: strings.Repeat("x", 100), max: 3,
			want: "… [truncated from 100 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Truncate returned invalid UTF-8 %q", got)
			}
		})
	}
}

// Every cut of a text mixing runes of every width and invalid bytes is
// valid UTF-8 within the limit.
func TestTruncateAnyLimit(t *testing.T) {
	in := strings.Repeat("aé€😀\xff\xe2\x82", 200)
	for limit := 40; limit < len(in)+10; limit++ {
		got := Truncate(in, limit)
		if !utf8.ValidString(got) || len(got) > limit {
			t.Fatalf("Truncate(…, %d) = %d bytes, valid %v", limit, len(got), utf8.ValidString(got))
		}
	}
}

func TestLineEscapesWhatATerminalWouldObey(t *testing.T) {
	tests := []struct{ in, line, lines string }{
		{"u42 /p/sku-7", "u42 /p/sku-7", "u42 /p/sku-7"},
		{"caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"},
		{"\x1b]0;pwned\x07\x1b[2J", `\x1b]0;pwned\a\x1b[2J`, `\x1b]0;pwned\a\x1b[2J`},
		{"ok\rconsistency 100.00%", `ok\rconsistency 100.00%`, `ok\rconsistency 100.00%`},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"abc\u202edcba", `abc\u202edcba`, `abc\u202edcba`},
		{"bad \xff byte", `bad \xff byte`, `bad \xff byte`},
		{"\u009b31m", `\u009b31m`, `\u009b31m`},
	}
	for _, tt := range tests {
		if got := Line(tt.in); got != tt.line {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
		}
		if got := Lines(tt.in); got != tt.lines {
			t.Errorf("Lines(%q) = %q, want %q", tt.in, got, tt.lines)
		}
	}
}
