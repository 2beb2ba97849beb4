package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// TestLintRefusesADiamond checks that a DAG in which one ledger event
// reaches a stage by two routes is refused where the routes meet, with the
// file and line of the input: the sink would drop the second route's
// operation of each event as already applied (both carry the event's
// origin).
func TestLintRefusesADiamond(t *testing.T) {
	const p = "persistent://shop/pipeline/"
	cases := []struct {
		name  string
		edits []edit
		// file, at: where the problem must be (the line containing at).
		file, at, field, message string
	}{
		{
			name: "a stage reads a topic and a topic derived from it",
			edits: []edit{{file: "functions/product-sales.yaml",
				old: "  - " + p + "purchases\n", new: "  - " + p + "purchases\n  - " + p + "valid\n"}},
			file: "functions/product-sales.yaml", at: "- " + p + "valid", field: "inputs[1]",
			message: "diamond: one event of persistent://shop/ledger/events reaches product-sales by two inputs, " + p + "purchases (written by purchases) and " + p + "valid (written by validate)",
		},
		{
			name: "a stage reads the first stage's topic and a topic derived from it",
			edits: []edit{{file: "functions/user-activity.yaml",
				old: "  - " + p + "valid\n", new: "  - " + p + "valid\n  - " + p + "distinct\n"}},
			file: "functions/user-activity.yaml", at: "- " + p + "distinct", field: "inputs[1]",
			message: "reaches user-activity by two inputs, " + p + "valid (written by validate) and " + p + "distinct (written by dedup)",
		},
		{
			name: "two functions fed by one stage write one topic",
			edits: []edit{
				{file: "functions/purchases-again.yaml", new: strings.NewReplacer("name: purchases", "name: purchases-again", "subName: purchases", "subName: purchases-again").Replace(purchasesConfig)},
				{file: "pipeline.yaml", old: "  - config: functions/product-sales.yaml\n",
					new: "  - config: functions/purchases-again.yaml\n    binary: github.com/foldline/foldline/functions/shop/purchases/cmd\n  - config: functions/product-sales.yaml\n"},
			},
			file: "functions/product-sales.yaml", at: "- " + p + "purchases", field: "inputs[0]",
			message: "diamond: one event of persistent://shop/ledger/events reaches product-sales twice through " + p + "purchases, which purchases, purchases-again all write from it",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShopManifests(t)
			for _, e := range tc.edits {
				applyEdit(t, dir, e)
			}
			_, err := manifest.Load(dir)
			var problems manifest.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Load: %v, want the manifests' problems", err)
			}
			file := filepath.Join(dir, tc.file)
			if !hasProblem(problems, file, lineOf(t, file, tc.at), tc.field, tc.message) {
				t.Errorf("problems:\n%v\nwant %s:%d: %s: %s", problems, tc.file, lineOf(t, file, tc.at), tc.field, tc.message)
			}
			if n := strings.Count(problems.Error(), "diamond"); n != 1 {
				t.Errorf("%d diamond problems, want 1 (where the routes meet, not downstream):\n%v", n, problems)
			}
		})
	}
	set, err := manifest.Load(testenv.ShopManifests(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := set.Graph(); len(problems) != 0 {
		t.Errorf("the shop's DAG (a fan-out, no diamond): %v", problems)
	}
}

// purchasesConfig is the shop's purchases.yaml.
var purchasesConfig = func() string {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "functions", "purchases.yaml"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// TestRollbackGraceReadsADuration checks the view manifest's rollbackGrace:
// a duration or whole days, 0 allowed, 24h when absent, and a bad one named
// with its file and line.
func TestRollbackGraceReadsADuration(t *testing.T) {
	cases := []struct {
		name, value string
		want        time.Duration
		problem     string
	}{
		{name: "absent", want: manifest.DefaultRollbackGrace},
		{name: "hours", value: "36h", want: 36 * time.Hour},
		{name: "days", value: "2d", want: 48 * time.Hour},
		{name: "none", value: "0s", want: 0},
		{name: "not a duration", value: "soon", problem: `"soon": want a duration such as 24h, 90m or 7d`},
		{name: "negative", value: "-1h", problem: "want a duration of 0 or more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShopManifests(t)
			if tc.value != "" {
				applyEdit(t, dir, edit{file: "views/user_activity.yaml", old: "version: 1\n", new: "version: 1\nrollbackGrace: " + tc.value + "\n"})
			}
			set, err := manifest.Load(dir)
			if tc.problem != "" {
				var problems manifest.Problems
				file := filepath.Join(dir, "views/user_activity.yaml")
				if !errors.As(err, &problems) || !hasProblem(problems, file, lineOf(t, file, "rollbackGrace:"), "rollbackGrace", tc.problem) {
					t.Fatalf("Load: %v, want %s at rollbackGrace", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := set.ViewByName("user_activity")
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Grace(); got != tc.want {
				t.Errorf("grace %s, want %s", got, tc.want)
			}
		})
	}
}
