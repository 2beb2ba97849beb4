package gobuild

import (
	"cmp"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/foldline/foldline/internal/plainfile"
)

// Platform is a GOOS/GOARCH pair.
type Platform struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
}

// DefaultPlatform is the functions workers' platform: Linux on amd64.
var DefaultPlatform = Platform{GOOS: "linux", GOARCH: "amd64"}

func (p Platform) String() string { return p.GOOS + "/" + p.GOARCH }

// ErrBadPlatform is returned for a GOOS or GOARCH that is not a word.
var ErrBadPlatform = errors.New("bad platform")

// platformWord is what GOOS and GOARCH values look like (go tool dist list).
var platformWord = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// OrDefault fills an empty field from DefaultPlatform and checks the form.
func (p Platform) OrDefault() (Platform, error) {
	if p.GOOS == "" {
		p.GOOS = DefaultPlatform.GOOS
	}
	if p.GOARCH == "" {
		p.GOARCH = DefaultPlatform.GOARCH
	}
	if !platformWord.MatchString(p.GOOS) || !platformWord.MatchString(p.GOARCH) {
		return p, fmt.Errorf("%w: --goos %q --goarch %q: want words such as linux and amd64 (go tool dist list)", ErrBadPlatform, p.GOOS, p.GOARCH)
	}
	return p, nil
}

// FileName is the name of pkg's binary for a platform, in a cache or a
// prebuilt directory.
func FileName(pkg string, p Platform) string {
	return strings.NewReplacer("/", "_", ".", "_").Replace(pkg) + "-" + p.GOOS + "-" + p.GOARCH
}

// IndexFile names the index foldline build writes into its directory.
const IndexFile = "foldline-binaries.json"

// Index lists the binaries of a prebuilt directory.
type Index struct {
	Platform Platform `json:"platform"`
	// Binaries maps a package to its file (in the directory) and digest.
	Binaries map[string]IndexEntry `json:"binaries"`
}

// IndexEntry is one prebuilt binary.
type IndexEntry struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// maxIndexBytes bounds the index: a line per binary.
const maxIndexBytes = 16 << 20

// ErrPrebuilt is returned when a prebuilt directory lacks a package, or
// holds a binary whose digest or platform is not the one asked for.
var ErrPrebuilt = errors.New("prebuilt binary unusable")

// WriteIndex writes the index of the binaries built into dir, and its
// signature with key (SignatureFile).
func WriteIndex(dir string, p Platform, bins map[string]Binary, key ed25519.PrivateKey) error {
	idx := Index{Platform: p, Binaries: map[string]IndexEntry{}}
	for pkg, bin := range bins {
		idx.Binaries[pkg] = IndexEntry{File: filepath.Base(bin.Path), SHA256: bin.SHA256}
	}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", IndexFile, err)
	}
	data = append(data, '\n')
	// The signature first: an index never stands next to a signature of
	// another one it would pass for, and a failed write leaves an index
	// that no longer verifies.
	if err := plainfile.WriteAtomic(filepath.Join(dir, SignatureFile), sign(key, data), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", SignatureFile, err)
	}
	if err := plainfile.WriteAtomic(filepath.Join(dir, IndexFile), data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", IndexFile, err)
	}
	return nil
}

// prebuilt takes pkg's binary from b.Prebuilt, checking that the index
// carries the signature of b.PrebuiltKey's key, and that the binary is
// there, for the platform asked for, and unchanged since foldline build.
func (b *Builder) prebuilt(pkg string) (Binary, error) {
	b.indexMu.Lock()
	defer b.indexMu.Unlock()
	if b.index == nil {
		key, err := verifyingKey(cmp.Or(b.PrebuiltKey, DefaultSigningKeyFile()))
		if err != nil {
			return Binary{}, fmt.Errorf("%w: %w", ErrPrebuilt, err)
		}
		data, err := plainfile.Read(filepath.Join(b.Prebuilt, IndexFile), maxIndexBytes)
		if err != nil {
			return Binary{}, fmt.Errorf("%w: reading the index of %s (made by foldline build --out): %w", ErrPrebuilt, b.Prebuilt, err)
		}
		sig, err := plainfile.Read(filepath.Join(b.Prebuilt, SignatureFile), maxKeyBytes)
		if err != nil {
			return Binary{}, fmt.Errorf("%w: reading the signature of the index of %s: %w", ErrPrebuilt, b.Prebuilt, err)
		}
		if !checkSignature(key, data, sig) {
			return Binary{}, fmt.Errorf("%w: %s is not signed by the key in %s: the binaries were not built by foldline build with that key, or were changed since",
				ErrPrebuilt, filepath.Join(b.Prebuilt, IndexFile), cmp.Or(b.PrebuiltKey, DefaultSigningKeyFile()))
		}
		var idx Index
		if err := json.Unmarshal(data, &idx); err != nil {
			return Binary{}, fmt.Errorf("%w: reading %s: %w", ErrPrebuilt, filepath.Join(b.Prebuilt, IndexFile), err)
		}
		want, err := b.Platform.OrDefault()
		if err != nil {
			return Binary{}, err
		}
		if idx.Platform != want {
			return Binary{}, fmt.Errorf("%w: %s holds binaries for %s, not %s", ErrPrebuilt, b.Prebuilt, idx.Platform, want)
		}
		b.index = &idx
	}
	e, ok := b.index.Binaries[pkg]
	if !ok || e.File != filepath.Base(e.File) {
		return Binary{}, fmt.Errorf("%w: %s holds no binary of %s (foldline build --out %s builds every one the manifests name)", ErrPrebuilt, b.Prebuilt, pkg, b.Prebuilt)
	}
	path := filepath.Join(b.Prebuilt, e.File)
	sum, err := fileSHA256(path)
	if err != nil {
		return Binary{}, fmt.Errorf("%w: %w", ErrPrebuilt, err)
	}
	if sum != e.SHA256 {
		return Binary{}, fmt.Errorf("%w: %s changed since foldline build (digest %s, index %s)", ErrPrebuilt, path, sum, e.SHA256)
	}
	return Binary{Package: pkg, Path: path, SHA256: sum, Platform: b.index.Platform}, nil
}
