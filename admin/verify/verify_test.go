package verify

import (
	"strings"
	"testing"
)

// The keys and values of the rows verify shows are the events': an event
// whose user is a terminal escape, or a line of forged output, shows as
// text.
func TestWriteEscapesTheRowsItShows(t *testing.T) {
	res := &Result{View: "user_activity", Table: "user_activity_v1", Examples: []Example{{
		Kind:  "different",
		Key:   "u1\x1b]0;pwned\x07",
		Fold:  map[string]any{"last_url": "/a\nconsistency 100.00%: all rows consistent"},
		Table: map[string]any{"last_url": "/b\u202e"},
	}}}
	var out strings.Builder
	res.Write(&out)
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x07\u202e") || strings.Count(text, "\n") != 3 {
		t.Fatalf("Write printed a control character or a forged line:\n%q", text)
	}
	for _, want := range []string{`u1\x1b]0;pwned\a`, `/a\nconsistency`, `/b\u202e`} {
		if !strings.Contains(text, want) {
			t.Errorf("Write printed %q, want %s in it", text, want)
		}
	}
}
