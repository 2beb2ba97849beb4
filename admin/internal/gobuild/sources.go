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
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A binary is built from a copy of the module's git-tracked files only,
// never from the checkout itself: go build runs outside the sandbox, and
// a package of the checkout could //go:embed what lies in it untracked —
// the local stack's state (.stack/credentials/pulsar-secret.key), a
// developer's .env — and carry it to the functions workers. In the copy
// there is nothing but the sources: the tracked files as the working tree
// has them (uncommitted changes included, untracked files not), a new
// package is built once git add names it. The module cache is used as
// ever; go.work is not (GOWORK=off), nor is go.mod changed (-mod=readonly).

// ErrUntracked is returned when the module is not in a git checkout, or
// the package asked for is not tracked: a build sees tracked files only.
var ErrUntracked = errors.New("not among the git-tracked sources")

// BinaryRoots are the folders of the module (module-relative, slash
// separated) whose packages may be a function's or a sink's binary:
// functions/ and sinks/. A package elsewhere, the module's root above all,
// is refused (ErrNotAPackage): it could embed files next to it that no
// function should carry. Builder.Roots replaces the list.
var BinaryRoots = []string{"functions", "sinks"}

// checkRoot refuses pkg (in the module that holds dir, checkInModule) when
// it does not lie under one of roots.
func checkRoot(dir, pkg string, roots []string) error {
	root, modPath, err := module(dir)
	if err != nil {
		return err
	}
	var rel string
	if isRelative(pkg) {
		abs, err := filepath.Abs(filepath.Join(dir, pkg))
		if err != nil {
			return fmt.Errorf("resolving %s: %w", pkg, err)
		}
		if rel, err = filepath.Rel(root, abs); err != nil {
			return fmt.Errorf("resolving %s: %w", pkg, err)
		}
		rel = filepath.ToSlash(rel)
	} else {
		rel = strings.TrimPrefix(strings.TrimPrefix(pkg, modPath), "/")
	}
	rel = path.Clean(rel)
	for _, r := range roots {
		if strings.HasPrefix(rel, r+"/") {
			return nil
		}
	}
	where := "the module's root"
	if rel != "." {
		where = rel + "/"
	}
	return fmt.Errorf("%q is %s, not a package under %s: a function's or sink's binary is built from one of those folders only: %w",
		pkg, where, strings.Join(mapSlice(roots, func(r string) string { return r + "/" }), " or "), ErrNotAPackage)
}

func mapSlice(s []string, f func(string) string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// sources is a copy of the module's tracked files, shared by the builds
// that run at once and removed when the last one is over.
type sources struct {
	root string // the copy's module root
	// digest is the SHA-256 of the tracked files copied, their names, modes
	// and contents (copyTracked): a build's key (reuse.go).
	digest string
	users  int
	ready  chan struct{}
	err    error
}

// acquireSources returns the copy of the tracked sources of the module
// that holds dir, and where dir lies in it, making the copy unless a build
// running now made one; release removes it after the last user.
func (b *Builder) acquireSources(ctx context.Context, dir string) (src *sources, copyDir string, release func(), err error) {
	root, _, err := module(dir)
	if err != nil {
		return nil, "", nil, err
	}
	rel, err := filepath.Rel(root, mustAbs(dir))
	if err != nil {
		return nil, "", nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	b.mu.Lock()
	s := b.sources
	create := s == nil
	if create {
		s = &sources{ready: make(chan struct{})}
		b.sources = s
	}
	s.users++
	b.mu.Unlock()
	if create {
		s.root, s.digest, s.err = copyTracked(ctx, root)
		close(s.ready)
	}
	release = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if s.users--; s.users == 0 {
			if b.sources == s {
				b.sources = nil
			}
			if s.root != "" {
				os.RemoveAll(filepath.Dir(s.root))
			}
		}
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		release()
		return nil, "", nil, ctx.Err()
	}
	if s.err != nil {
		release()
		return nil, "", nil, s.err
	}
	return s, filepath.Join(s.root, rel), release, nil
}

func mustAbs(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}

// copyTracked copies the git-tracked files of the module at root, as the
// working tree has them, into a new private temporary folder, and returns
// the copy's module root and the digest of what it copied: each file's
// name, permissions and content, in git's order. Only regular files are
// copied: a tracked symbolic link could lead out of the checkout.
func copyTracked(ctx context.Context, root string) (copyRoot, digest string, err error) {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("listing the git-tracked files of %s (binaries are built from those only; git init and git add them): %w: %v %s", root, ErrUntracked, err, strings.TrimSpace(stderr.String()))
	}
	tmp, err := os.MkdirTemp("", "foldline-sources-")
	if err != nil {
		return "", "", fmt.Errorf("copying the sources: %w", err)
	}
	copyRoot = filepath.Join(tmp, "module")
	tree := sha256.New()
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" || !filepath.IsLocal(name) {
			continue
		}
		if err := copyRegular(filepath.Join(root, name), filepath.Join(copyRoot, name), name, tree); err != nil {
			os.RemoveAll(tmp)
			return "", "", fmt.Errorf("copying the sources: %w", err)
		}
	}
	return copyRoot, hex.EncodeToString(tree.Sum(nil)), nil
}

// copyRegular copies the regular file src to dst, keeping its executable
// bit, and writes what it copied to tree: its name, permissions and the
// SHA-256 of its content. Anything else (deleted, a link, a submodule) is left out.
func copyRegular(src, dst, name string, tree io.Writer) error {
	info, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !info.Mode().IsRegular()) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	perm := info.Mode().Perm()&0o700 | 0o400
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	content := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, content), in)
	fmt.Fprintf(tree, "%s\x00%o\x00%x\n", name, perm, content.Sum(nil))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// modFlag is the -mod flag of a build in the copy at root: the vendor
// folder when the module vendors, else the module cache without changing
// go.mod.
func modFlag(root string) string {
	if _, err := os.Stat(filepath.Join(root, "vendor", "modules.txt")); err == nil {
		return "-mod=vendor"
	}
	return "-mod=readonly"
}

// checkTracked refuses a package whose folder is not in the copy: nothing
// of it is tracked.
func checkTracked(copyDir, pkg, copyRoot, modPath string) error {
	dir := filepath.Join(copyDir, pkg)
	if !isRelative(pkg) {
		dir = filepath.Join(copyRoot, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, modPath), "/")))
	}
	entries, err := os.ReadDir(dir)
	if err != nil || !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), ".go") }) {
		return fmt.Errorf("%s: no Go file of it is tracked by git (git add the package; binaries are built from tracked files only): %w", pkg, ErrUntracked)
	}
	return nil
}
