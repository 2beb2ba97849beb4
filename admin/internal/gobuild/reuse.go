package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A build is keyed by what decides its bytes: the tracked sources (their
// digest, as copied), the package (and where in the sources go runs, for
// a relative one), what an overlay
// lays over them, the platform, and go env's answer there (the toolchain's
// version, GOFLAGS, GOEXPERIMENT, GOAMD64 and the rest). Dependencies are
// the module's go.sum's, among the sources. The cache's index maps a key
// to the binary its build stored, so that the same build asked again (the
// next foldline command, a backfill after a deploy) takes that binary
// instead of linking it again: about 0.7 s of the go command per binary,
// which every plan, deploy and backfill paid for every stage.

// keyFormat changes whenever the build's flags (goBuild) do: a key names
// the bytes of one way of building.
const keyFormat = "foldline-build-1 -trimpath -ldflags=-w CGO_ENABLED=0 GOWORK=off"

// indexDir is the cache's folder of keys, each a file holding the name of
// the binary built for it.
const indexDir = ".index"

// buildKey returns the key of building pkg, from rel (slash separated) of
// the tracked sources whose digest is given, for platform, overlaid with
// what overlaid digests ("" for nothing).
func (b *Builder) buildKey(ctx context.Context, dir, digest, rel, pkg string, platform Platform, overlaid string) (string, error) {
	env, err := b.goEnv(ctx, dir, platform)
	if err != nil {
		return "", err
	}
	// An import path names its package wherever go runs; a relative one
	// from where it runs.
	where := ""
	if isRelative(pkg) {
		where = rel
	}
	h := sha256.New()
	for _, part := range []string{keyFormat, digest, where, pkg, overlaid, platform.GOOS, platform.GOARCH, env} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// goEnv returns go env's answer in dir for platform, asked once per
// Builder and platform, with the build's own environment.
func (b *Builder) goEnv(ctx context.Context, dir string, platform Platform) (string, error) {
	b.mu.Lock()
	env, ok := b.goEnvs[platform]
	b.mu.Unlock()
	if ok {
		return env, nil
	}
	cmd := exec.CommandContext(ctx, "go", "env", "-json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+platform.GOOS, "GOARCH="+platform.GOARCH, "CGO_ENABLED=0", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running go env: %w %s", err, strings.TrimSpace(stderr.String()))
	}
	var vars map[string]string
	if err := json.Unmarshal(out, &vars); err != nil {
		return "", fmt.Errorf("reading go env: %w", err)
	}
	// The C compiler's flags name a new temporary folder each time, and
	// builds run without cgo.
	delete(vars, "GOGCCFLAGS")
	sorted, err := json.Marshal(vars)
	if err != nil {
		return "", fmt.Errorf("reading go env: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.goEnvs == nil {
		b.goEnvs = map[Platform]string{}
	}
	b.goEnvs[platform] = string(sorted)
	return string(sorted), nil
}

// reuse returns the binary the cache's index holds for key, when it is a
// binary named name in the cache whose bytes still hash to the digest its
// file name ends with.
func reuse(cache, key, name string) (Binary, bool) {
	data, err := os.ReadFile(filepath.Join(cache, indexDir, key))
	if err != nil {
		return Binary{}, false
	}
	file := strings.TrimSpace(string(data))
	sum, ok := strings.CutPrefix(file, name+"-")
	if !ok || len(sum) != sha256.Size*2 || filepath.Base(file) != file {
		return Binary{}, false
	}
	path := filepath.Join(cache, file)
	f, err := os.Open(path)
	if err != nil {
		return Binary{}, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != sum {
		return Binary{}, false
	}
	return Binary{Path: path, SHA256: sum}, true
}

// remember records path, a binary of the cache, as key's build: written
// whole and renamed, so that a reader sees the old entry or the new one.
// Failing only costs the next build, which is why nothing is returned.
func remember(cache, key, path string) {
	dir := filepath.Join(cache, indexDir)
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".key-")
	if err != nil {
		return
	}
	_, err = tmp.WriteString(filepath.Base(path) + "\n")
	if cerr := tmp.Close(); err != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), filepath.Join(dir, key)) != nil {
		os.Remove(tmp.Name())
	}
}
