package gobuild

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// embedding is a main package that embeds file and prints it.
func embedding(file string) string {
	return "package main\n\nimport (\n\t_ \"embed\"\n\t\"fmt\"\n)\n\n//go:embed " + file + "\nvar data string\n\nfunc main() { fmt.Print(data) }\n"
}

// A build sees the git-tracked files only, as the working tree has them:
// a package that embeds a file git does not track does not build (in the
// checkout it would, and the file's content would ship to the workers),
// and one whose tracked file changed since the last commit gets the
// change.
func TestBuildSeesOnlyTrackedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	const secret = "the stack's signing key"
	dir := gitCheckout(t, map[string]string{
		"functions/leak/main.go":  embedding("pulsar-secret.key"),
		"functions/data/main.go":  embedding("data.txt"),
		"functions/data/data.txt": "as committed\n",
	}, map[string]string{
		"functions/leak/pulsar-secret.key": secret,
		"functions/new/main.go":            embedding("main.go"),
	})
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "sources")
	if err := os.WriteFile(filepath.Join(dir, "functions", "data", "data.txt"), []byte("changed in the working tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Builder{Dir: dir, CacheDir: t.TempDir()}

	bin, err := b.Build(t.Context(), "example.com/checkout/functions/leak")
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(be.Output, "pulsar-secret.key") {
		t.Errorf("building a package that embeds an untracked file: %+v, %v; want a build error about the file", bin, err)
	}
	if err == nil {
		if data, _ := os.ReadFile(bin.Path); bytes.Contains(data, []byte(secret)) {
			t.Errorf("the binary %s carries the untracked file's content", bin.Path)
		}
	}

	bin, err = b.Build(t.Context(), "./functions/data")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(bin.Path); !bytes.Contains(data, []byte("changed in the working tree")) {
		t.Errorf("the binary does not carry the working tree's version of a tracked file")
	}

	if _, err := b.Build(t.Context(), "example.com/checkout/functions/new"); !errors.Is(err, ErrUntracked) {
		t.Errorf("building an untracked package: %v, want ErrUntracked", err)
	}
	if _, err := (&Builder{Dir: t.TempDir(), CacheDir: t.TempDir()}).BuildGenerated(t.Context(), []byte("package main\nfunc main() {}\n")); err == nil {
		t.Errorf("building outside a module: no error")
	}
}

// A binary must be a package under functions/ or sinks/: the module's
// root, or any other folder, is refused before go build runs.
func TestBuildRefusesPackagesOutsideTheRoots(t *testing.T) {
	dir := gitCheckout(t, map[string]string{
		"main.go":              embedding("go.mod"),
		"admin/tool/main.go":   embedding("main.go"),
		"functions/ok/main.go": embedding("main.go"),
		"sinks/ok/main.go":     embedding("main.go"),
	}, nil)
	for _, tc := range []struct {
		pkg, want string
	}{
		{"example.com/checkout", "the module's root"},
		{".", "the module's root"},
		{"example.com/checkout/admin/tool", "admin/tool/"},
		{"./admin/tool", "admin/tool/"},
		{"example.com/checkout/functionsx/tool", "functionsx/tool/"},
	} {
		err := checkRoot(dir, tc.pkg, BinaryRoots)
		if !errors.Is(err, ErrNotAPackage) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "functions/ or sinks/") {
			t.Errorf("checkRoot(%s) = %v, want ErrNotAPackage naming %s", tc.pkg, err, tc.want)
		}
		if _, err := (&Builder{Dir: dir, CacheDir: t.TempDir()}).Build(t.Context(), tc.pkg); !errors.Is(err, ErrNotAPackage) {
			t.Errorf("Build(%s) = %v, want ErrNotAPackage", tc.pkg, err)
		}
	}
	for _, pkg := range []string{"example.com/checkout/functions/ok", "./sinks/ok"} {
		if err := checkRoot(dir, pkg, BinaryRoots); err != nil {
			t.Errorf("checkRoot(%s) = %v, want nil", pkg, err)
		}
	}
}
