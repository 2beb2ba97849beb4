package lint_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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
			// manifests/ as shipped, not the tests' frozen copy: whatever
			// views it declares must lint clean, and nothing here counts them.
			name:      "the shipped manifests/ without building",
			dir:       filepath.Join(testenv.RepoRoot(), "manifests"),
			skipBuild: true,
		},
		{
			name:      "a declared view naming a field its events lack",
			dir:       filepath.Join("testdata", "declared"),
			skipBuild: true,
			wantLines: [][2]string{
				{filepath.Join("testdata", "declared", "views", "user_spend_7d.yaml") + ":15: columns[1].value: ", "field price_cent is in no purchase event of samples/events.jsonl"},
			},
		},
		{
			name: "binary that does not build",
			dir:  filepath.Join("testdata", "buildfail"),
			wantLines: [][2]string{
				{filepath.Join("testdata", "buildfail", "pipeline.yaml") + ":5: functions[0].binary: ", "functions/examples/testdata/broken/main.go:7:15: undefined: notDefined"},
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

// writeManifests writes a one-function manifest directory whose pipeline
// names binary, and returns it.
func writeManifests(t *testing.T, binary string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"tenant.yaml": "kind: Tenant\nname: lintcase\nnamespaces:\n  - name: ledger\n    retention: {timeMinutes: -1, sizeMB: -1}\n" +
			"ledger:\n  - name: persistent://lintcase/ledger/events\n",
		"pipeline.yaml": "kind: Pipeline\nname: lintcase\nfunctions:\n  - config: functions/echo.yaml\n    binary: " + strconv.Quote(binary) + "\n",
		"functions/echo.yaml": "tenant: lintcase\nnamespace: ledger\nname: echo\ninputs:\n  - persistent://lintcase/ledger/events\n" +
			"output: persistent://lintcase/ledger/echoed\nsubName: echo\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHostileBinaryRunsNothing: a binary that is not a package of the
// module is reported at its field, and go build never runs with it (a
// -toolexec script would run during lint).
func TestHostileBinaryRunsNothing(t *testing.T) {
	scripts := t.TempDir()
	marker := filepath.Join(scripts, "ran")
	script := filepath.Join(scripts, "toolexec.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, binary, want string
	}{
		{name: "toolexec flag", binary: "-toolexec=" + script, want: "a flag of go build"},
		{name: "other flag", binary: "-o=/tmp/x", want: "a flag of go build"},
		{name: "absolute path", binary: scripts, want: "an absolute path"},
		{name: "pattern", binary: "./...", want: "a pattern"},
		{name: "spaces and quotes", binary: `./x -toolexec "sh"`, want: "want an import path"},
		{name: "dot-dot in an import path", binary: "github.com/foldline/foldline/../../evil", want: "does not hold .."},
		// These two have the right form and are refused by the build step,
		// which knows the module.
		{name: "another module", binary: "example.com/evil/cmd", want: "not in the module github.com/foldline/foldline"},
		{name: "out of the module", binary: "../../../../../../../tmp/evil", want: "leads out of the module"},
		// A binary is a package under functions/ or sinks/: the module's
		// root could embed the local stack's keys (.stack/credentials).
		{name: "the module's root", binary: "github.com/foldline/foldline", want: "is the module's root, not a package under functions/ or sinks/"},
		{name: "outside functions and sinks", binary: "github.com/foldline/foldline/admin/cmd/foldline", want: "is admin/cmd/foldline/, not a package under functions/ or sinks/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeManifests(t, tc.binary)
			var out, errOut bytes.Buffer
			err := lint.Run(t.Context(), lint.Options{Dir: dir, Out: &out, ErrOut: &errOut, CacheDir: t.TempDir()})
			if !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("Run error = %v, want manifest.ErrInvalid\n%s%s", err, out.String(), errOut.String())
			}
			prefix := filepath.Join(dir, "pipeline.yaml") + ":5: functions[0].binary: "
			if line := strings.TrimSpace(out.String()); !strings.HasPrefix(line, prefix) || !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
				t.Errorf("problems = %q, want one line %q…%q", out.String(), prefix, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the -toolexec script ran during lint")
			}
		})
	}
}
