package cassandra

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// abbreviate's text reaches a dead-letter reason and a metric label: it
// once cut a value mid-rune, which made the instance's metrics scrape panic.
func TestAbbreviateKeepsUTF8(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{name: "multi-byte runes across the cut", raw: `"a` + strings.Repeat("€", 100) + `"`},
		{name: "invalid UTF-8", raw: "\"\xff\xfe" + strings.Repeat("x", 100) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := abbreviate(json.RawMessage(tt.raw))
			if !utf8.ValidString(got) || len(got) > 80 {
				t.Errorf("abbreviate = %q (%d bytes), want valid UTF-8 of at most 80 bytes", got, len(got))
			}
		})
	}
}
