package lint_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/lint"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

func TestRun(t *testing.T) {
	cases := []struct {
		name      string
		dir       string
		skipBuild bool
		// wantLines are the problem lines expected on the output, each as
		// a prefix file:line: field: and a part of the message.
		wantLines [][2]string
	}{
		{
			name:      "shop manifests without building",
			dir:       filepath.Join(testenv.RepoRoot(), "manifests"),
			skipBuild: true,
		},
		{
			name: "binary that does not build",
			dir:  filepath.Join("testdata", "buildfail"),
			wantLines: [][2]string{
				{filepath.Join("testdata", "buildfail", "pipeline.yaml") + ":5: functions[0].binary: ", "./broken does not build: broken/main.go:5:15: undefined: notDefined"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := lint.Run(t.Context(), lint.Options{Dir: tc.dir, SkipBuild: tc.skipBuild, Out: &out, ErrOut: &errOut, CacheDir: t.TempDir()})
			if len(tc.wantLines) == 0 {
				if err != nil {
					t.Fatalf("Run: %v\n%s", err, out.String())
				}
				return
			}
			if !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("Run error = %v, want manifest.ErrInvalid", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.wantLines) {
				t.Fatalf("%d problem lines, want %d:\n%s", len(lines), len(tc.wantLines), out.String())
			}
			for i, want := range tc.wantLines {
				if !strings.HasPrefix(lines[i], want[0]) || !strings.Contains(lines[i], want[1]) {
					t.Errorf("line %d = %q, want %q…%q", i, lines[i], want[0], want[1])
				}
			}
		})
	}
}
