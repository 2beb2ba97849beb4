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

// sources are the module's tracked files as builds running now share
// them: their digest, read where they lie, and a copy of them, made only
// for a build that the cache does not hold (copy), removed when the last
// build is over (see docs/design/decisions.md).
type sources struct {
	module string // the checkout's module root
	// digest is the SHA-256 of the tracked files, their names, modes and
	// contents, as trackedFiles reads them: a build's key (reuse.go).
	digest string
	users  int
	ready  chan struct{} // closed once digest or err is set
	err    error

	copied chan struct{} // made by the first build to copy, closed once the copy's fields are set
	// root is the copy's module root, and copyDigest the digest of what
	// was copied: the tracked files as they were then, digest unless they
	// changed since they were hashed.
	root       string
	copyDigest string
	copyErr    error
}

// acquireSources returns the tracked sources of the module that holds dir,
// hashed, and where dir lies in the module (slash separated), hashing them
// unless a build running now did; release removes their copy, if one was
// made, after the last user.
func (b *Builder) acquireSources(ctx context.Context, dir string) (src *sources, rel string, release func(), err error) {
	root, _, err := module(dir)
	if err != nil {
		return nil, "", nil, err
	}
	if rel, err = filepath.Rel(root, mustAbs(dir)); err != nil {
		return nil, "", nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	b.mu.Lock()
	s := b.sources
	create := s == nil
	if create {
		s = &sources{module: root, ready: make(chan struct{})}
		b.sources = s
	}
	s.users++
	b.mu.Unlock()
	if create {
		s.digest, s.err = trackedFiles(ctx, root, "")
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
	if err := waitClosed(ctx, s.ready); err != nil {
		release()
		return nil, "", nil, err
	}
	if s.err != nil {
		release()
		return nil, "", nil, s.err
	}
	return s, filepath.ToSlash(rel), release, nil
}

// copy returns the copy of the sources (its module root) and the digest
// of what it holds, making it unless another build did. Only a build
// runs in the copy: go build never sees the checkout.
func (b *Builder) copy(ctx context.Context, s *sources) (root, digest string, err error) {
	b.mu.Lock()
	first := s.copied == nil
	if first {
		s.copied = make(chan struct{})
	}
	b.mu.Unlock()
	if first {
		s.root, s.copyDigest, s.copyErr = copyTracked(ctx, s.module)
		close(s.copied)
	}
	if err := waitClosed(ctx, s.copied); err != nil {
		return "", "", err
	}
	return s.root, s.copyDigest, s.copyErr
}

// waitClosed waits until ch is closed or ctx ends.
func waitClosed(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
// the copy's module root and the digest of what it copied (trackedFiles).
func copyTracked(ctx context.Context, root string) (copyRoot, digest string, err error) {
	tmp, err := os.MkdirTemp("", "foldline-sources-")
	if err != nil {
		return "", "", fmt.Errorf("copying the sources: %w", err)
	}
	copyRoot = filepath.Join(tmp, "module")
	if digest, err = trackedFiles(ctx, root, copyRoot); err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	return copyRoot, digest, nil
}

// trackedFiles returns the digest of the git-tracked files of the module
// at root, as the working tree has them: each file's name, permissions
// and content, in git's order. With copyRoot set, it copies each file it
// reads there too. Only regular files count: a tracked symbolic link could
// lead out of the checkout.
func trackedFiles(ctx context.Context, root, copyRoot string) (digest string, err error) {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing the git-tracked files of %s (binaries are built from those only; git init and git add them): %w: %v %s", root, ErrUntracked, err, strings.TrimSpace(stderr.String()))
	}
	what := "reading"
	if copyRoot != "" {
		what = "copying"
	}
	tree := sha256.New()
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" || !filepath.IsLocal(name) {
			continue
		}
		dst := ""
		if copyRoot != "" {
			dst = filepath.Join(copyRoot, name)
		}
		if err := copyRegular(filepath.Join(root, name), dst, name, tree); err != nil {
			return "", fmt.Errorf("%s the sources: %w", what, err)
		}
	}
	return hex.EncodeToString(tree.Sum(nil)), nil
}

// copyRegular copies the regular file src to dst (unless dst is ""),
// keeping its executable bit, and writes what it read to tree: its name,
// permissions and the SHA-256 of its content. Anything else (deleted, a
// link, a submodule) is left out.
func copyRegular(src, dst, name string, tree io.Writer) error {
	info, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !info.Mode().IsRegular()) {
		return nil
	}
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	perm := info.Mode().Perm()&0o700 | 0o400
	content := sha256.New()
	var w io.Writer = content
	var out *os.File
	if dst != "" {
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm); err != nil {
			return err
		}
		w = io.MultiWriter(out, content)
	}
	_, err = io.Copy(w, in)
	fmt.Fprintf(tree, "%s\x00%o\x00%x\n", name, perm, content.Sum(nil))
	if out != nil {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
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
