package lint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/lint"
	"github.com/foldline/foldline/internal/testenv"
)

// TestContractOfGoAndYAML runs the shop's paths over the pipeline's sample
// events and checks that what the Go code emits and what the view
// manifests declare are held against each other, at the manifests' lines.
func TestContractOfGoAndYAML(t *testing.T) {
	cache := t.TempDir() // the binaries, built once for every case
	edit := func(t *testing.T, dir, file, old, new string) {
		t.Helper()
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s does not hold %q", file, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		want   []string // problem lines, each as file:line: field: message
	}{
		{name: "the shop as it is", change: func(*testing.T, string) {}},
		{name: "a column the code emits is missing, another merges otherwise", change: func(t *testing.T, dir string) {
			edit(t, dir, "views/user_activity.yaml", "  - {name: last_url, type: text, merge: set, description: the url of the user's last page view in ledger order}\n", "")
			edit(t, dir, "views/user_activity.yaml", "{name: page_views, type: bigint, merge: add", "{name: page_views, type: bigint, merge: max")
		}, want: []string{
			"views/user_activity.yaml:17: columns: user-activity emits last_url, which ",
			"views/user_activity.yaml:18: columns[0].merge: user-activity merges page_views by add, the view by max",
		}},
		{name: "a pipeline entry whose binary feeds another view", change: func(t *testing.T, dir string) {
			edit(t, dir, "pipeline.yaml", "functions/shop/useractivity/cmd", "functions/shop/productsales/cmd")
		}, want: []string{
			"pipeline.yaml:", "functions[2].binary: user-activity's binary emits operations on view product_sales, but its output persistent://shop/pipeline/user-activity-ops feeds view user_activity",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShopManifests(t)
			tc.change(t, dir)
			problems, err := lint.Check(t.Context(), dir, true, cache, testenv.LogWriter{T: t})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range problems {
				got = append(got, strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
			}
			all := strings.Join(got, "\n")
			if len(tc.want) == 0 && len(got) > 0 {
				t.Fatalf("problems in the shop as it is:\n%s", all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no problem says %q; got:\n%s", w, all)
				}
			}
		})
	}
}
