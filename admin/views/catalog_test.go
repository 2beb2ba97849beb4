package views

import (
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/registry"
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

// TestHistoryShowsTheCodeAndWhereItChanged checks describe's history of a
// version: the code that built it, then an in-place change with the ledger
// position where it took effect and the binary before and after.
func TestHistoryShowsTheCodeAndWhereItChanged(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	built := registry.Event{At: at, Kind: registry.EventBuilt, By: "deploy", Stages: []registry.StageCode{
		{Stage: "validate", Binary: "aaaaaaaaaaaaaaaa", Config: "cccccccccccccccc"},
		{Stage: "user-activity", Binary: "bbbbbbbbbbbbbbbb", Config: "dddddddddddddddd"},
	}}
	changed := registry.Event{At: at.Add(time.Hour), Kind: registry.EventInPlace, By: "deploy --in-place",
		Stages:    []registry.StageCode{{Stage: "user-activity", Binary: "eeeeeeeeeeeeeeee", Config: "dddddddddddddddd"}},
		Positions: map[string]string{"persistent://shop/ledger/events": "12:34"}}
	var out strings.Builder
	writeHistory(&out, []VersionHistory{
		{Table: "user_activity_v2", Events: []registry.Event{built, changed}, InPlaceChanges: 1},
		{Table: "user_activity_v1", Events: []registry.Event{built}},
		{Table: "user_activity_v0", Events: []registry.Event{}},
	})
	text := out.String()
	for _, want := range []string{
		"user_activity_v2: 1 in-place code change(s)",
		"2026-12-06T10:00:00Z  built by deploy from the ledger's first event with validate (binary aaaaaaaaaaaa, config cccccccccccc), user-activity (binary bbbbbbbbbbbb, config dddddddddddd)",
		"2026-12-06T11:00:00Z  code changed in place by deploy --in-place after ledger position persistent://shop/ledger/events 12:34: user-activity (binary bbbbbbbbbbbb, config dddddddddddd) → (binary eeeeeeeeeeee, config dddddddddddd)",
		"user_activity_v1: the fold of the ledger under the code that built it",
		"user_activity_v0: no history recorded",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("history:\n%s\nwant the line %q", text, want)
		}
	}
}
