package views

import (
	"strings"
	"testing"
	"time"
)

// The manifests' texts a tenant writes and the sink's error print as text.
func TestDescriptionWriteEscapesItsTexts(t *testing.T) {
	d := &Description{View: "user_activity", Keyspace: "shop", Catalog: Catalog{
		Description: "What each user did.\nSecond line \x1b[2J",
		Owner:       "team\x1b]0;pwned\x07",
		Tags:        []string{"a\rb"},
		Key:         []Column{{Name: "user", Type: "text", Description: "who\x1b[31m"}},
		Columns:     []Column{{Name: "page_views", Type: "bigint", Merge: "add", Description: "views\u202e"}},
	}, Error: "row u1\x1b[2J failed"}
	var out strings.Builder
	d.Write(&out, time.Now())
	text := out.String()
	if strings.ContainsAny(text, "\x1b\x07\r\u202e") {
		t.Fatalf("Write printed a control character:\n%q", text)
	}
	for _, want := range []string{`Second line \x1b[2J`, `team\x1b]0;pwned\a`, `a\rb`, `who\x1b[31m`, `views\u202e`, `row u1\x1b[2J failed`} {
		if !strings.Contains(text, want) {
			t.Errorf("Write printed %q, want %q in it", text, want)
		}
	}
}
