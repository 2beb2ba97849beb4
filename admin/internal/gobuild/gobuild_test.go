package gobuild

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// testRoots lets the tests build their own package, in testdata.
var testRoots = []string{"admin/internal/gobuild/testdata"}

const (
	hello = "github.com/foldline/foldline/admin/internal/gobuild/testdata/hello"
	other = "github.com/foldline/foldline/functions/examples/identity"
)

// Binaries are built for the platform asked for (linux/amd64 by default),
// statically; a prebuilt directory gives the same bytes back and refuses a
// binary that changed, a package it lacks and another platform.
func TestPlatformsAndPrebuiltBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	root := ModuleDir(".")
	out := t.TempDir()
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	built := map[string]Binary{}
	for arch, machine := range machines {
		b := &Builder{Dir: root, CacheDir: out, Platform: Platform{GOARCH: arch}, Roots: testRoots}
		bin, err := b.Build(t.Context(), hello)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(bin.Path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != machine || bin.Platform != (Platform{"linux", arch}) {
			t.Errorf("%s: built for %v, platform %v", arch, f.Machine, bin.Platform)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: dynamically linked (interpreter), want a static binary", arch)
			}
		}
		f.Close()
		built[arch] = bin
	}
	keyFile := filepath.Join(t.TempDir(), SigningKeyName)
	key, _, err := SigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteIndex(out, DefaultPlatform, map[string]Binary{hello: built["amd64"]}, key); err != nil {
		t.Fatal(err)
	}
	got, err := (&Builder{Prebuilt: out, PrebuiltKey: keyFile}).Build(t.Context(), hello)
	if err != nil || got.SHA256 != built["amd64"].SHA256 || got.Path != built["amd64"].Path {
		t.Fatalf("prebuilt = %+v, %v; want %+v", got, err, built["amd64"])
	}
	if _, err := (&Builder{Prebuilt: out, PrebuiltKey: keyFile}).Build(t.Context(), other); !errors.Is(err, ErrPrebuilt) {
		t.Errorf("a package the directory lacks: %v, want ErrPrebuilt", err)
	}
	if _, err := (&Builder{Prebuilt: out, PrebuiltKey: keyFile, Platform: Platform{GOARCH: "arm64"}}).Build(t.Context(), hello); !errors.Is(err, ErrPrebuilt) {
		t.Errorf("another platform: %v, want ErrPrebuilt", err)
	}
	tampered := filepath.Join(out, filepath.Base(built["amd64"].Path))
	if err := os.Remove(tampered); err != nil { // a cache entry is read-only: replaced, not rewritten
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Builder{Prebuilt: out, PrebuiltKey: keyFile}).Build(t.Context(), hello); !errors.Is(err, ErrPrebuilt) {
		t.Errorf("a binary changed since the build: %v, want ErrPrebuilt", err)
	}
	if _, err := (&Builder{Dir: root, CacheDir: out, Platform: Platform{GOOS: "linux; rm -rf /"}, Roots: testRoots}).Build(t.Context(), hello); !errors.Is(err, ErrBadPlatform) {
		t.Errorf("a hostile GOOS: %v, want ErrBadPlatform", err)
	}
}

// PackageDir finds a package of the module by import path or relative
// path and refuses one outside it; a builder of prebuilt binaries builds
// no generated source.
func TestPackageDirAndGenerated(t *testing.T) {
	root, _, err := module(".")
	if err != nil {
		t.Fatal(err)
	}
	b := &Builder{Dir: root}
	want := filepath.Join(root, "admin", "internal", "gobuild", "testdata", "hello")
	for _, pkg := range []string{hello, "./admin/internal/gobuild/testdata/hello"} {
		if got, err := b.PackageDir(pkg); err != nil || got != want {
			t.Errorf("PackageDir(%s) = %s, %v; want %s", pkg, got, err, want)
		}
	}
	for _, pkg := range []string{"example.com/other/pkg", "../outside", "-toolexec=x"} {
		if _, err := b.PackageDir(pkg); !errors.Is(err, ErrNotAPackage) {
			t.Errorf("PackageDir(%s): %v, want ErrNotAPackage", pkg, err)
		}
	}
	if _, err := (&Builder{Prebuilt: t.TempDir()}).BuildGenerated(t.Context(), []byte("package main\nfunc main() {}\n")); !errors.Is(err, ErrNoToolchain) {
		t.Errorf("BuildGenerated with prebuilt binaries: %v, want ErrNoToolchain", err)
	}
	if testing.Short() {
		return
	}
	bin, err := (&Builder{Dir: root, CacheDir: t.TempDir()}).BuildGenerated(t.Context(), []byte("package main\n\nimport _ \"github.com/foldline/foldline/functions/envelope\"\n\nfunc main() {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin.Path); err != nil || bin.SHA256 == "" {
		t.Errorf("generated binary %+v: %v", bin, err)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.Base(bin.Package))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the generated package's directory exists in the module: %v", err)
	}
}
