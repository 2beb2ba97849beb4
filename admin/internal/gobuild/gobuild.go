// Package gobuild builds the Go binaries of functions and sinks into a
// cache directory and fingerprints them. The fingerprint is what lets deploy
// tell a changed binary from an unchanged one: Go builds are reproducible,
// so the same source, toolchain and checkout path give the same bytes. The
// build uses the go command's default flags so that it shares the build
// cache with everyone's go build and go vet.
//
// Every checkout of a machine shares one binary cache, so two builds of
// one package from different sources may run at once. The cache's entries
// are therefore content-addressed and immutable: a build writes into a
// private temporary folder, the binary is synced and hashed there, then
// renamed to a name that ends with its digest, read-only. A name never
// changes content, so a Binary's Path keeps the bytes its SHA256 names;
// Binary.Pinned copies them out, checking the digest, for an upload that
// must be the bytes the plan showed whatever happens to the cache.
package gobuild

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ErrBuild is what a *BuildError is (errors.Is).
var ErrBuild = errors.New("go build failed")

// ErrNotAPackage is returned for a package argument that is not a package
// of the module: a flag (-toolexec=… would run any program), an absolute
// path, a path that leaves the module, a pattern, or another module's
// package. Nothing is run for it.
var ErrNotAPackage = errors.New("not a package of the module")

// packageForm is what an import path or a relative package path may hold:
// no spaces, quotes, '=', '@' or ':'.
var packageForm = regexp.MustCompile(`^[A-Za-z0-9_.~+/-]+$`)

// CheckPackage checks the form of a package argument without looking at
// the module: an import path (github.com/foldline/foldline/functions/x/cmd)
// or a relative path (./cmd). Build also checks that it lies in the module.
func CheckPackage(pkg string) error {
	bad := func(why string) error { return fmt.Errorf("%q: %s: %w", pkg, why, ErrNotAPackage) }
	switch {
	case pkg == "":
		return bad("empty")
	case strings.HasPrefix(pkg, "-"):
		return bad("a flag of go build, not a package")
	case !packageForm.MatchString(pkg):
		return bad("want an import path or a ./relative path (letters, digits and . _ ~ + / -)")
	case strings.HasPrefix(pkg, "/"):
		return bad("an absolute path: want an import path of the module or a ./relative path")
	case strings.Contains(pkg, "..."):
		return bad("a pattern: name one package")
	}
	if !isRelative(pkg) && slices.Contains(strings.Split(pkg, "/"), "..") {
		return bad("an import path does not hold ..")
	}
	return nil
}

func isRelative(pkg string) bool {
	return pkg == "." || pkg == ".." || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../")
}

// checkInModule refuses a package outside the module that holds dir: an
// import path without the module's path as prefix, or a relative path that
// leads out of the module's directory.
func checkInModule(dir, pkg string) error {
	root, modPath, err := module(dir)
	if err != nil {
		return err
	}
	if isRelative(pkg) {
		abs, err := filepath.Abs(filepath.Join(dir, pkg))
		if err != nil {
			return fmt.Errorf("resolving %s: %w", pkg, err)
		}
		if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("%q: leads out of the module %s (%s): %w", pkg, modPath, root, ErrNotAPackage)
		}
		return nil
	}
	if pkg != modPath && !strings.HasPrefix(pkg, modPath+"/") {
		return fmt.Errorf("%q: not in the module %s: %w", pkg, modPath, ErrNotAPackage)
	}
	return nil
}

// module returns the directory and path of the module that holds dir.
func module(dir string) (root, path string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			if path := modfileModule(data); path != "" {
				return d, path, nil
			}
			return "", "", fmt.Errorf("reading %s: no module line", filepath.Join(d, "go.mod"))
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("finding the module of %s: no go.mod in it or above it", abs)
		}
	}
}

// modfileModule returns the path of go.mod's module line.
func modfileModule(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

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
	SHA256   string
	Platform Platform
}

// Builder builds packages with the go command found on PATH, or takes
// them from a directory of prebuilt binaries.
type Builder struct {
	// Dir is where go runs: any directory inside the module that holds the
	// packages (see ModuleDir).
	Dir string
	// CacheDir receives the binaries. Default: the user's cache directory
	// under foldline/bin.
	CacheDir string
	// Platform is what the binaries are built for. Default linux/amd64,
	// the functions workers' platform (also on Kubernetes).
	Platform Platform
	// Prebuilt, when set, is a directory that foldline build filled: Build
	// takes each binary from it (checking the index's signature, then each
	// binary's digest and platform) instead of running go build.
	Prebuilt string
	// PrebuiltKey is the PEM file of the key Prebuilt's index must be
	// signed with: the public key, or the private key foldline build
	// signs with. Default DefaultSigningKeyFile().
	PrebuiltKey string
	// Progress, when set, receives one line per build.
	Progress io.Writer
	// Roots are the module's folders whose packages Build builds (see
	// BinaryRoots, the default).
	Roots []string

	mu        sync.Mutex
	goEnvs    map[Platform]string  // go env's answer, by platform (reuse.go)
	sources   *sources             // the tracked files as builds running now share them
	jobs      map[string]*buildJob // by package: built, or being built
	generated map[string]*buildJob // BuildGenerated's, by the source's digest
	indexMu   sync.Mutex
	index     *Index
}

// buildJob is one package's build, which every caller asking for the
// package while it runs waits for.
type buildJob struct {
	done chan struct{}
	bin  Binary
	err  error
}

// DefaultCacheDir is where binaries go when Builder.CacheDir is empty.
func DefaultCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "foldline", "bin")
}

// Build builds pkg (once per Builder) for b.Platform, statically
// (CGO_ENABLED=0: the binary runs in any Linux image, scratch included), or
// takes it from b.Prebuilt. It is safe to call from several goroutines: a
// package asked for while its build runs is built once, and its callers
// all get that build; a failed build is tried again by the next call.
func (b *Builder) Build(ctx context.Context, pkg string) (Binary, error) {
	return b.once(ctx, &b.jobs, pkg, func() (Binary, error) { return b.build(ctx, pkg) })
}

// once runs build for key once among the jobs of *jobs: a caller asking
// while it runs waits for it and gets its outcome; a failed build is run
// again by the next caller.
func (b *Builder) once(ctx context.Context, jobs *map[string]*buildJob, key string, build func() (Binary, error)) (Binary, error) {
	b.mu.Lock()
	if *jobs == nil {
		*jobs = map[string]*buildJob{}
	}
	j, running := (*jobs)[key]
	if !running {
		j = &buildJob{done: make(chan struct{})}
		(*jobs)[key] = j
	}
	b.mu.Unlock()
	if !running {
		j.bin, j.err = build()
		if j.err != nil {
			b.mu.Lock()
			delete(*jobs, key)
			b.mu.Unlock()
		}
		close(j.done)
		return j.bin, j.err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		return Binary{}, fmt.Errorf("building %s: %w", key, ctx.Err())
	}
	if j.err != nil && ctx.Err() == nil && errors.Is(j.err, context.Canceled) {
		return b.once(ctx, jobs, key, build) // the caller that started it gave up, not this one
	}
	return j.bin, j.err
}

// BuildAll builds pkgs at once (the go command links each in a process of
// its own), so that later Build calls of them return at once. It returns
// the builds' errors, joined.
func (b *Builder) BuildAll(ctx context.Context, pkgs []string) error {
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		wg.Go(func() { _, errs[i] = b.Build(ctx, pkg) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// build is Build's work for one package.
func (b *Builder) build(ctx context.Context, pkg string) (Binary, error) {
	if err := CheckPackage(pkg); err != nil {
		return Binary{}, err
	}
	if b.Prebuilt != "" {
		return b.prebuilt(pkg)
	}
	platform, err := b.Platform.OrDefault()
	if err != nil {
		return Binary{}, err
	}
	if err := checkInModule(cmp.Or(b.Dir, "."), pkg); err != nil {
		return Binary{}, err
	}
	roots := b.Roots
	if roots == nil {
		roots = BinaryRoots
	}
	if err := checkRoot(cmp.Or(b.Dir, "."), pkg, roots); err != nil {
		return Binary{}, err
	}
	dir, err := b.cacheDir()
	if err != nil {
		return Binary{}, err
	}
	return b.goBuild(ctx, cmp.Or(b.Dir, "."), pkg, dir, FileName(pkg, platform), platform, nil, "", fmt.Sprintf("building %s for %s", pkg, platform))
}

// cacheDir returns the directory the binaries go to, created.
func (b *Builder) cacheDir() (string, error) {
	dir := b.CacheDir
	if dir == "" {
		dir = DefaultCacheDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating binary cache %s: %w", dir, err)
	}
	return dir, nil
}

// goBuild runs go build for pkg (a package argument CheckPackage accepts)
// in the copy of the tracked sources (acquireSources, copy) where dir lies
// in it, and stores the binary in the cache folder under name and its digest
// (see store). flags come before the package; overlay, when set, makes
// them from the copy's module root (a generated package's overlay), and
// overlaid is the digest of what it lays over the sources. A build whose
// sources, package, platform and go environment were built before into
// the cache is not run again: its binary is taken (reuse.go). Otherwise
// progress, the build's line, goes to b.Progress.
func (b *Builder) goBuild(ctx context.Context, dir, pkg, cache, name string, platform Platform, overlay func(copyRoot string) ([]string, error), overlaid, progress string) (Binary, error) {
	src, rel, release, err := b.acquireSources(ctx, dir)
	if err != nil {
		return Binary{}, fmt.Errorf("building %s: %w", pkg, err)
	}
	defer release()
	// The cache is asked for the build of the sources as hashed in place;
	// only a build it does not hold copies them, and, should the tracked
	// files have changed since they were hashed, it is asked again for the
	// build of what the copy holds.
	var key, copyRoot string
	for digest := src.digest; ; {
		if key, err = b.buildKey(ctx, dir, digest, rel, pkg, platform, overlaid); err != nil {
			return Binary{}, fmt.Errorf("building %s: %w", pkg, err)
		}
		if bin, ok := reuse(cache, key, name); ok {
			bin.Package, bin.Platform = pkg, platform
			return bin, nil
		}
		if copyRoot != "" {
			break
		}
		var copied string
		if copyRoot, copied, err = b.copy(ctx, src); err != nil {
			return Binary{}, fmt.Errorf("building %s: %w", pkg, err)
		}
		if copied == digest {
			break
		}
		digest = copied
	}
	copyDir := filepath.Join(copyRoot, filepath.FromSlash(rel))
	if b.Progress != nil {
		fmt.Fprintln(b.Progress, progress)
	}
	var flags []string
	if overlay != nil {
		if flags, err = overlay(copyRoot); err != nil {
			return Binary{}, err
		}
	} else {
		_, modPath, err := module(dir)
		if err != nil {
			return Binary{}, err
		}
		if err := checkTracked(copyDir, pkg, copyRoot, modPath); err != nil {
			return Binary{}, err
		}
	}
	tmp, err := os.MkdirTemp(cache, ".building-")
	if err != nil {
		return Binary{}, fmt.Errorf("building %s: %w", pkg, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	// -trimpath: the same source builds the same bytes in any checkout, so
	// deploy's fingerprint (which hashes the binary) does not see a change
	// when CI builds from a fresh clone. -w drops the DWARF tables (a
	// quarter of the size, uploaded to the worker on every create) and
	// keeps the symbols that panics, pprof and perf need.
	// "--" ends the flags: whatever pkg is, go build takes it as a package.
	args := append([]string{"build", "-trimpath", "-ldflags=-w", modFlag(copyRoot), "-o", out}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "--", pkg)...)
	cmd.Dir = copyDir
	cmd.Env = append(os.Environ(), "GOOS="+platform.GOOS, "GOARCH="+platform.GOARCH, "CGO_ENABLED=0", "GOWORK=off")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Binary{}, fmt.Errorf("building %s: %w", pkg, ctx.Err())
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// The compiler names the copy's files: name the checkout's.
			root, _, _ := module(dir)
			return Binary{}, &BuildError{Package: pkg, Output: strings.ReplaceAll(output.String(), copyRoot, root)}
		}
		return Binary{}, fmt.Errorf("running go build for %s: %w", pkg, err)
	}
	path, sum, err := store(cache, name, out)
	if err != nil {
		return Binary{}, fmt.Errorf("storing the binary of %s: %w", pkg, err)
	}
	remember(cache, key, path)
	return Binary{Package: pkg, Path: path, SHA256: sum, Platform: platform}, nil
}

// store moves the binary built at built into the cache folder as
// NAME-DIGEST, read-only: synced first, so that a name in the cache is
// never a file half written, and renamed, so that it appears whole. A name
// that exists already holds the same bytes (the digest says so): renaming
// over it changes nothing a reader sees.
func store(cache, name, built string) (path, sum string, err error) {
	f, err := os.OpenFile(built, os.O_RDWR, 0)
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(0o555)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	path = filepath.Join(cache, name+"-"+sum)
	if err := os.Rename(built, path); err != nil {
		return "", "", err
	}
	syncDir(cache)
	return path, sum, nil
}

// syncDir syncs a folder's entries (best effort: not every system can).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// ErrChanged is returned when a binary's file no longer holds the bytes
// its digest names.
var ErrChanged = errors.New("the binary is not the one built")

// Pinned copies the binary into a new file of a private temporary folder,
// checking on the way that its bytes are those bin.SHA256 names, and
// returns the copy's path and a function that removes it. A deploy
// uploads the copy: the bytes it fingerprinted and showed in its plan,
// whoever writes to the cache or a prebuilt folder meanwhile.
func (bin Binary) Pinned() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "foldline-upload-")
	if err != nil {
		return "", nil, fmt.Errorf("copying binary %s: %w", bin.Path, err)
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, filepath.Base(bin.Path))
	if err := copyChecked(bin.Path, path, bin.SHA256); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}

// copyChecked copies src to a new file dst, and fails unless what it
// copied has the digest want.
func copyChecked(src, dst, want string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading binary %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o500)
	if err != nil {
		return fmt.Errorf("copying binary %s: %w", src, err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying binary %s: %w", src, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has digest %s, want %s", ErrChanged, src, got, want)
	}
	return nil
}

// Built returns the binaries built (or taken) so far, by package.
func (b *Builder) Built() map[string]Binary {
	b.mu.Lock()
	defer b.mu.Unlock()
	built := map[string]Binary{}
	for pkg, j := range b.jobs {
		select {
		case <-j.done:
			if j.err == nil {
				built[pkg] = j.bin
			}
		default: // still building
		}
	}
	return built
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
