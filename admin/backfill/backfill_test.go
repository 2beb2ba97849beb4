package backfill

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

func TestCompareRows(t *testing.T) {
	cases := []struct {
		name               string
		old, new           map[string]string
		onlyOld, onlyNew   int
		differing          int
		identical          bool
		exampleContainsAll []string
	}{
		{name: "identical", old: map[string]string{"k=a": "n=1"}, new: map[string]string{"k=a": "n=1"}, identical: true},
		{name: "both empty", old: map[string]string{}, new: map[string]string{}, identical: true},
		{
			name: "every kind of difference", old: map[string]string{"k=a": "n=1", "k=b": "n=2"}, new: map[string]string{"k=a": "n=5", "k=c": "n=3"},
			onlyOld: 1, onlyNew: 1, differing: 1,
			exampleContainsAll: []string{"differs: k=a old n=1 new n=5", "only in old: k=b n=2", "only in new: k=c n=3"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := compareRows(tc.old, tc.new)
			if d.OnlyOld != tc.onlyOld || d.OnlyNew != tc.onlyNew || d.Differing != tc.differing || d.Identical() != tc.identical {
				t.Fatalf("diff %+v, want only old %d, only new %d, differing %d", d, tc.onlyOld, tc.onlyNew, tc.differing)
			}
			if d.OldRows != len(tc.old) || d.NewRows != len(tc.new) {
				t.Errorf("rows %d/%d, want %d/%d", d.OldRows, d.NewRows, len(tc.old), len(tc.new))
			}
			examples := strings.Join(d.Examples, "\n")
			for _, want := range tc.exampleContainsAll {
				if !strings.Contains(examples, want) {
					t.Errorf("examples %q lack %q", d.Examples, want)
				}
			}
		})
	}
}

func TestCompareRowsBoundsExamples(t *testing.T) {
	old := map[string]string{}
	for i := range 20 {
		old[string(rune('a'+i))] = "x"
	}
	if d := compareRows(old, map[string]string{}); d.OnlyOld != 20 || len(d.Examples) != maxExamples {
		t.Fatalf("diff of 20 missing rows: %d only old, %d examples; want 20 and %d", d.OnlyOld, len(d.Examples), maxExamples)
	}
}

// A row made of an event's text shows on the terminal as text: escapes and
// newlines in it come out escaped.
func TestCompareRowsExamplesAreSafeToPrint(t *testing.T) {
	d := compareRows(map[string]string{"user=u1\x1b]0;pwned\x07": "last_url=/a\nconsistency 100%"}, map[string]string{})
	if len(d.Examples) != 1 || strings.ContainsAny(d.Examples[0], "\x1b\x07\n") || !strings.Contains(d.Examples[0], `\x1b]0;pwned\a`) {
		t.Errorf("examples %q, want the escape, the bell and the newline escaped", d.Examples)
	}
}

func TestNextVersion(t *testing.T) {
	versions := func(tables ...string) registry.Entry {
		var e registry.Entry
		for _, t := range tables {
			e.Versions = append(e.Versions, registry.Version{Table: t})
		}
		return e
	}
	cases := []struct {
		name     string
		entry    registry.Entry
		manifest int
		want     int
	}{
		{name: "a new view takes the manifests' version", entry: versions(), manifest: 1, want: 1},
		{name: "a new view at a later version", entry: versions(), manifest: 3, want: 3},
		{name: "one past the registered", entry: versions("v_v1"), manifest: 1, want: 2},
		{name: "one past the highest, whatever their order", entry: versions("v_v3", "v_v1", "v_v2"), manifest: 1, want: 4},
		{name: "the manifests' when it is ahead", entry: versions("v_v1"), manifest: 5, want: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextVersion(tc.entry, &manifest.View{Name: "v", Version: tc.manifest}); got != tc.want {
				t.Fatalf("nextVersion = %d, want %d", got, tc.want)
			}
		})
	}
}

// An unknown view is refused before anything is contacted, with the views
// there are and the not-found exit code.
func TestUnknownViewIsRefused(t *testing.T) {
	opts := Options{Options: deploy.Options{Command: target.Command{Dir: testenv.ShopManifestsDir()}}, View: "nope"}
	for name, run := range map[string]func() error{
		"start": func() error { _, err := Start(t.Context(), opts); return err },
		"watch": func() error { _, err := Run(t.Context(), opts, true); return err },
		"abort": func() error { _, err := Abort(t.Context(), opts); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := run()
			if !errors.Is(err, exitcode.ErrNotFound) || exitcode.For(err) != exitcode.NotFound {
				t.Fatalf("got %v, want a not-found error", err)
			}
			if !strings.Contains(err.Error(), "view nope is not declared") || !strings.Contains(err.Error(), "product_sales") {
				t.Errorf("message %q does not name the view and the views there are", err)
			}
		})
	}
}

func TestStallWatchFlagsAStageWithoutProgress(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(at time.Duration, done, backlog int64) *Snapshot {
		return &Snapshot{At: start.Add(at), Stages: []StageProgress{{Name: "validate-bf-x_v2", Done: done, Backlog: backlog}}}
	}
	cases := []struct {
		name    string
		steps   []*Snapshot
		stalled bool
	}{
		{name: "progressing", steps: []*Snapshot{snap(0, 1, 5), snap(time.Minute, 2, 5), snap(2*time.Minute, 3, 5)}},
		{name: "nothing to do", steps: []*Snapshot{snap(0, 5, 0), snap(2*time.Minute, 5, 0)}},
		{name: "stuck with a backlog", steps: []*Snapshot{snap(0, 1, 5), snap(30*time.Second, 1, 5), snap(61*time.Second, 1, 5)}, stalled: true},
		{name: "not stuck long enough", steps: []*Snapshot{snap(0, 1, 5), snap(59*time.Second, 1, 5)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := stallWatch{}
			for _, s := range tc.steps {
				w.mark(s)
			}
			last := tc.steps[len(tc.steps)-1].Stages[0]
			if got := strings.Contains(last.Problem, "no progress for"); got != tc.stalled {
				t.Fatalf("problem %q, want stalled %v", last.Problem, tc.stalled)
			}
		})
	}
}

func TestFailureFloodNeedsMoreFailuresThanSuccesses(t *testing.T) {
	for _, c := range []struct {
		processed, failed int64
		flood             bool
	}{
		{processed: 99_000, failed: 1_000},        // malformed events: expected
		{processed: 0, failed: 99},                // too few to judge
		{processed: 50, failed: 400, flood: true}, // most inputs fail
		{processed: 400, failed: 400},
	} {
		msg := failureFlood(c.processed, c.failed, "decoding event: bad json", "persistent://t/p/dlq")
		if (msg != "") != c.flood {
			t.Errorf("failureFlood(%d processed, %d failed) = %q, want a flood: %v", c.processed, c.failed, msg, c.flood)
		}
		if c.flood && (!strings.Contains(msg, "persistent://t/p/dlq") || !strings.Contains(msg, "bad json")) {
			t.Errorf("failureFlood message %q does not name the dead-letter topic and the latest error", msg)
		}
	}
}

func TestTimeLeftIsTheSlowestWorkingStage(t *testing.T) {
	eta := func(s float64) *float64 { return &s }
	cases := []struct {
		name   string
		stages []StageProgress
		left   time.Duration
		ok     bool
	}{
		{name: "slowest of those working", stages: []StageProgress{
			{Done: 10, Total: 20, ETASeconds: eta(0.4), readsLedger: true}, {Done: 5, Total: 20, ETASeconds: eta(1.5)}, {Done: 7, Total: 7, Backlog: 3}},
			left: 1500 * time.Millisecond, ok: true},
		{name: "one without an estimate", stages: []StageProgress{{Done: 10, Total: 20, ETASeconds: eta(0.4), readsLedger: true}, {Done: 0, Total: 20}}},
		{name: "the ledger read, a later stage's queue left", stages: []StageProgress{
			{Done: 20, Total: 20, readsLedger: true}, {Done: 0, Total: 2}, {Done: 5, Total: 9, ETASeconds: eta(30)}},
			left: 0, ok: true},
		{name: "none working", stages: []StageProgress{{Done: 20, Total: 20, readsLedger: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			left, ok := (&Snapshot{Stages: tc.stages}).timeLeft()
			if left != tc.left || ok != tc.ok {
				t.Fatalf("timeLeft() = %v, %v; want %v, %v", left, ok, tc.left, tc.ok)
			}
		})
	}
}
