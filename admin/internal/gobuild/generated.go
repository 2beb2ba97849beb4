package gobuild

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoToolchain is returned by BuildGenerated on a Builder that takes its
// binaries from a prebuilt directory: it builds nothing.
var ErrNoToolchain = errors.New("binaries are prebuilt: nothing is built here")

// PackageDir returns the directory of pkg, a package of the module (an
// import path or a ./relative path, as Build takes it).
func (b *Builder) PackageDir(pkg string) (string, error) {
	if err := CheckPackage(pkg); err != nil {
		return "", err
	}
	dir := cmp.Or(b.Dir, ".")
	if err := checkInModule(dir, pkg); err != nil {
		return "", err
	}
	if isRelative(pkg) {
		return filepath.Abs(filepath.Join(dir, pkg))
	}
	root, modPath, err := module(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, modPath))), nil
}

// BuildGenerated builds a main package that exists only as source, one
// file of it, for this machine's use (b.Platform). The package lies, for
// the go command alone (go build -overlay), in a directory of its own at
// the module's root, named after the source's digest: it imports the
// module's packages as a package of the module does, and the binary is
// cached under that name. Like Build, it builds a source once per
// Builder, whoever asks while it runs.
func (b *Builder) BuildGenerated(ctx context.Context, source []byte) (Binary, error) {
	digest := sha256.Sum256(source)
	name := "foldline-generated-" + hex.EncodeToString(digest[:8])
	return b.once(ctx, &b.generated, name, func() (Binary, error) { return b.buildGenerated(ctx, name, source) })
}

func (b *Builder) buildGenerated(ctx context.Context, name string, source []byte) (Binary, error) {
	if b.Prebuilt != "" {
		return Binary{}, ErrNoToolchain
	}
	platform, err := b.Platform.OrDefault()
	if err != nil {
		return Binary{}, err
	}
	root, _, err := module(cmp.Or(b.Dir, "."))
	if err != nil {
		return Binary{}, err
	}
	cache, err := b.cacheDir()
	if err != nil {
		return Binary{}, err
	}
	tmp, err := os.MkdirTemp("", name)
	if err != nil {
		return Binary{}, fmt.Errorf("writing generated source: %w", err)
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(file, source, 0o644); err != nil {
		return Binary{}, fmt.Errorf("writing generated source: %w", err)
	}
	// The package lies at the root of the copy of the sources the build
	// runs in (goBuild), known once the copy is made.
	overlay := func(copyRoot string) ([]string, error) {
		data, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(copyRoot, name, "main.go"): file}})
		if err != nil {
			return nil, fmt.Errorf("writing the overlay of %s: %w", name, err)
		}
		overlayFile := filepath.Join(tmp, "overlay.json")
		if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
			return nil, fmt.Errorf("writing the overlay of %s: %w", name, err)
		}
		return []string{"-overlay", overlayFile}, nil
	}
	digest := sha256.Sum256(source)
	return b.goBuild(ctx, root, "./"+name, cache, FileName(name, platform), platform, overlay,
		hex.EncodeToString(digest[:]), fmt.Sprintf("building %s (generated) for %s", name, platform))
}
