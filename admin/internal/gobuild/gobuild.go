// Package gobuild builds the Go binaries of functions and sinks into a
// cache directory and fingerprints them. The fingerprint is what lets deploy
// tell a changed binary from an unchanged one: Go builds are reproducible,
// so the same source, toolchain and checkout path give the same bytes. The
// build uses the go command's default flags so that it shares the build
// cache with everyone's go build and go vet.
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrBuild is what a *BuildError is (errors.Is).
var ErrBuild = errors.New("go build failed")

// BuildError carries the compiler's output for a package that did not build.
type BuildError struct {
	Package string
	Output  string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("building %s: %s", e.Package, strings.TrimSpace(e.Output))
}

// Is makes errors.Is(err, ErrBuild) hold.
func (e *BuildError) Is(target error) bool { return target == ErrBuild }

// ModuleDir returns the first of dirs that lies inside a Go module (has a
// go.mod in it or above it), so that manifests kept outside the module
// still build from the directory the CLI runs in; "" when none does.
func ModuleDir(dirs ...string) string {
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		for d := abs; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return dir
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

// Binary is a built executable.
type Binary struct {
	Package string
	Path    string
	// SHA256 is the hex digest of the executable's bytes.
	SHA256 string
}

// Builder builds packages with the go command found on PATH.
type Builder struct {
	// Dir is where go runs: any directory inside the module that holds the
	// packages (see ModuleDir).
	Dir string
	// CacheDir receives the binaries. Default: the user's cache directory
	// under foldline/bin.
	CacheDir string
	// Progress, when set, receives one line per build.
	Progress io.Writer
	built    map[string]Binary
}

// DefaultCacheDir is where binaries go when Builder.CacheDir is empty.
func DefaultCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "foldline", "bin")
}

// Build builds pkg (once per Builder) for the platform the CLI runs on,
// which is the functions worker's when the stack is local.
func (b *Builder) Build(ctx context.Context, pkg string) (Binary, error) {
	if bin, ok := b.built[pkg]; ok {
		return bin, nil
	}
	dir := b.CacheDir
	if dir == "" {
		dir = DefaultCacheDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, fmt.Errorf("creating binary cache %s: %w", dir, err)
	}
	out := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg))
	if b.Progress != nil {
		fmt.Fprintf(b.Progress, "building %s\n", pkg)
	}
	// -trimpath: the same source builds the same bytes in any checkout, so
	// deploy's fingerprint (which hashes the binary) does not see a change
	// when CI builds from a fresh clone. -w drops the DWARF tables (a
	// quarter of the size, uploaded to the worker on every create) and
	// keeps the symbols that panics, pprof and perf need.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-w", "-o", out, pkg)
	cmd.Dir = b.Dir
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Binary{}, fmt.Errorf("building %s: %w", pkg, ctx.Err())
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Binary{}, &BuildError{Package: pkg, Output: output.String()}
		}
		return Binary{}, fmt.Errorf("running go build for %s: %w", pkg, err)
	}
	sum, err := fileSHA256(out)
	if err != nil {
		return Binary{}, err
	}
	bin := Binary{Package: pkg, Path: out, SHA256: sum}
	if b.built == nil {
		b.built = map[string]Binary{}
	}
	b.built[pkg] = bin
	return bin, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading binary %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading binary %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
