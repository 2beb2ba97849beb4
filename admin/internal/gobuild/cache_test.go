package gobuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// checkout writes a module with one main package, functions/cmd, that
// prints says, all of it tracked by git: two checkouts of one module with
// different sources.
func checkout(t *testing.T, says string) string {
	t.Helper()
	return gitCheckout(t, map[string]string{
		"functions/cmd/main.go": fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(%q) }\n", says),
	}, nil)
}

// gitCheckout writes a module example.com/checkout of the tracked files
// (git add) and the untracked ones, and returns its folder.
func gitCheckout(t *testing.T, tracked, untracked map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	tracked["go.mod"] = "module example.com/checkout\n\ngo 1.22\n"
	write := func(files map[string]string) {
		for name, content := range files {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(tracked)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "--all")
	write(untracked)
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Two checkouts build the same package, from different sources, into one
// cache at once: each gets a binary whose file holds the bytes its digest
// names, after both builds as during them, and the cache keeps both.
func TestConcurrentBuildsShareACache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	cache := t.TempDir()
	sources := []string{"checkout a", "checkout b"}
	bins := make([]Binary, len(sources))
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	for i, says := range sources {
		dir := checkout(t, says)
		wg.Go(func() {
			b := &Builder{Dir: dir, CacheDir: cache}
			bins[i], errs[i] = b.Build(t.Context(), "example.com/checkout/functions/cmd")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("building %s: %v", sources[i], err)
		}
	}
	if bins[0].SHA256 == bins[1].SHA256 || bins[0].Path == bins[1].Path {
		t.Fatalf("two sources built to %+v and %+v: want two binaries", bins[0], bins[1])
	}
	for i, bin := range bins {
		if got := sha256Of(t, bin.Path); got != bin.SHA256 {
			t.Errorf("%s: %s holds digest %s, the build said %s", sources[i], bin.Path, got, bin.SHA256)
		}
		info, err := os.Stat(bin.Path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: cache entry %s is writable (%v)", sources[i], bin.Path, info.Mode())
		}
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == indexDir })
	if len(entries) != 2 {
		t.Errorf("the cache holds %d entries, want the 2 binaries and no temporary file: %v", len(entries), entries)
	}

	// A rebuild of the same source names the same entry, and leaves it whole.
	again, err := (&Builder{Dir: checkout(t, "checkout a"), CacheDir: cache}).Build(t.Context(), "example.com/checkout/functions/cmd")
	if err != nil || again.Path != bins[0].Path || sha256Of(t, again.Path) != bins[0].SHA256 {
		t.Errorf("rebuilding checkout a: %+v, %v; want %s again", again, err, bins[0].Path)
	}
}

// A build asked again with the same sources, package and platform, by
// another Builder (the next command), takes the binary the first stored
// and runs no go build, nor copies the sources; a changed tracked file,
// or a cached binary whose bytes no longer match its name, builds again.
func TestSameBuildIsReused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	cache, dir := t.TempDir(), checkout(t, "reused")
	t.Setenv("GOTMPDIR", t.TempDir())
	const pkg = "example.com/checkout/functions/cmd"
	build := func(from ...string) (Binary, bool) {
		t.Helper()
		var progress bytes.Buffer
		bin, err := (&Builder{Dir: filepath.Join(append([]string{dir}, from...)...), CacheDir: cache, Progress: &progress}).Build(t.Context(), pkg)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256Of(t, bin.Path); got != bin.SHA256 || bin.Package != pkg {
			t.Fatalf("%+v: the file's digest is %s", bin, got)
		}
		return bin, strings.Contains(progress.String(), "building")
	}
	first, built := build()
	if !built {
		t.Fatal("the first build ran no go build")
	}
	// Taken from the cache, a build copies no sources: with no temporary
	// folder to copy them into, it still succeeds (the go command has a
	// folder of its own, GOTMPDIR, set from the start: go env, part of the
	// key, names it).
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if again, built := build(); built || again != first {
		t.Errorf("the same build again: %+v (built: %v), want %+v taken from the cache", again, built, first)
	}
	if again, built := build("functions"); built || again != first {
		t.Errorf("the same import path from another folder of the module: %+v (built: %v), want %+v taken from the cache", again, built, first)
	}
	if _, err := (&Builder{Dir: dir, CacheDir: cache}).Build(t.Context(), "example.com/checkout/functions/other"); err == nil || !strings.Contains(err.Error(), "copying the sources") {
		t.Errorf("a build the cache does not hold, with no temporary folder: %v, want it to fail copying the sources", err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, "functions/cmd/main.go"), []byte("package main\n\nfunc main() { println(\"changed\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, built := build()
	if !built || changed.SHA256 == first.SHA256 {
		t.Errorf("after a change of a tracked file: %+v (built: %v), want a new build", changed, built)
	}
	if err := os.Chmod(changed.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed.Path, []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	if rebuilt, built := build(); !built || rebuilt.SHA256 != changed.SHA256 {
		t.Errorf("with the cached binary tampered with: %+v (built: %v), want it built again", rebuilt, built)
	}
}

// Pinned hands over a private copy of the bytes the digest names, and
// refuses a file that changed since.
func TestPinnedRefusesAChangedBinary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bin")
	if err := os.WriteFile(path, []byte("the bytes built"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := Binary{Package: "p", Path: path, SHA256: sha256Of(t, path)}
	copied, remove, err := bin.Pinned()
	if err != nil {
		t.Fatal(err)
	}
	if copied == path || sha256Of(t, copied) != bin.SHA256 {
		t.Errorf("Pinned = %s, want a copy of %s with its bytes", copied, path)
	}
	remove()
	if _, err := os.Stat(copied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy outlived remove: %v", err)
	}
	if err := os.WriteFile(path, []byte("other bytes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bin.Pinned(); !errors.Is(err, ErrChanged) {
		t.Errorf("Pinned of a changed file: %v, want ErrChanged", err)
	}
}
