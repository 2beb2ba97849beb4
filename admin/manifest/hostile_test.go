package manifest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/testenv"
)

// aliasBomb is a view whose sink user config nests aliases levels deep,
// ten of the previous level each: 10^levels nodes once expanded, from a
// file of a few hundred bytes.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("kind: View\nname: bomb\nkey:\n  - {name: k, type: text}\ncolumns:\n  - {name: n, type: bigint, merge: add}\n" +
		"sink:\n  input: persistent://shop/pipeline/user-activity-ops\n  userConfig:\n")
	b.WriteString(`    l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]` + "\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "    l%d: &l%d [%s]\n", i, i, strings.Repeat(p+", ", 9)+p)
	}
	return b.String()
}

// loadWithin runs Load on dir and fails the test if it does not return
// within limit (a FIFO blocks, /dev/zero never ends).
func loadWithin(t *testing.T, dir string, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := manifest.Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Load(%s) did not return within %s", dir, limit)
		return nil
	}
}

func TestLoadRefusesHostileFiles(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		setUp func(t *testing.T, path string)
		want  string
	}{
		{
			name:  "alias bomb of 10^6 nodes",
			file:  "views/bomb.yaml",
			setUp: func(t *testing.T, path string) { write(t, path, aliasBomb(6)) },
			want:  "expands to more than 100000 YAML nodes",
		},
		{
			name:  "alias bomb of 10^9 nodes",
			file:  "views/bomb.yaml",
			setUp: func(t *testing.T, path string) { write(t, path, aliasBomb(9)) },
			want:  "expands to more than 100000 YAML nodes",
		},
		{
			name: "alias bomb in a function config",
			file: "functions/validate.yaml",
			setUp: func(t *testing.T, path string) {
				appendTo(t, path, strings.ReplaceAll(strings.SplitN(aliasBomb(9), "  userConfig:\n", 2)[1], "\n    ", "\n  ")[2:])
			},
			want: "expands to more than 100000 YAML nodes",
		},
		{
			name: "FIFO",
			file: "views/pipe.yaml",
			setUp: func(t *testing.T, path string) {
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Skipf("making a FIFO: %v", err)
				}
			},
			want: "not a regular file (a FIFO)",
		},
		{
			name: "symbolic link to /dev/zero",
			file: "views/zero.yaml",
			setUp: func(t *testing.T, path string) {
				if err := os.Symlink("/dev/zero", path); err != nil {
					t.Fatal(err)
				}
			},
			want: "not a regular file (a symbolic link)",
		},
		{
			name:  "larger than 1 MiB",
			file:  "views/big.yaml",
			setUp: func(t *testing.T, path string) { write(t, path, "# "+strings.Repeat("x", 1<<20)+"\n") },
			want:  "larger than 1048576 bytes",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShopManifests(t)
			path := filepath.Join(dir, tc.file)
			tc.setUp(t, path)
			start := time.Now()
			err := loadWithin(t, dir, 10*time.Second)
			var problems manifest.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Load error = %v, want problems", err)
			}
			var found int
			for _, p := range problems {
				if p.File == path && strings.Contains(p.Message, tc.want) {
					found++
				}
			}
			if found != 1 {
				t.Errorf("want one problem of %s saying %q, got:\n%v", path, tc.want, problems)
			}
			t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
		})
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(data)+text)
}
