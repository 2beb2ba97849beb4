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
