package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foldline/foldline/internal/testenv"
)

// scripts/pulsar-admin makes the relative paths of pulsar-admin's file
// options absolute against the caller's directory, since the distribution's
// pulsar-admin changes to its own home before it reads them; every other
// argument passes as it is, spaces and quotes included. A stand-in
// distribution (in a cache folder of the test's own) prints what it got.
func TestPulsarAdminResolvesCallersPaths(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "apache-pulsar-4.0.8", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stand := "#!/usr/bin/env bash\ncd \"$(dirname \"$0\")/..\"\nprintf '%s\\n' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "pulsar-admin"), []byte(stand), 0o755); err != nil {
		t.Fatal(err)
	}
	caller := t.TempDir()
	for _, f := range []string{"manifests/functions/validate.yaml", "fn", "with space.jar"} {
		path := filepath.Join(caller, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secrets := `{"token": "$NOT_EXPANDED"}`
	args := []string{"functions", "create",
		"--function-config-file", "manifests/functions/validate.yaml",
		"--go", "fn",
		"--jar=with space.jar",
		"--py", "missing.py", // not the caller's: left for pulsar-admin to report
		"--path", "/abs/already",
		"--name", "fn", // a file of that name exists, but --name takes no file
		"--secrets", secrets,
		"--user-config", "",
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "scripts", "pulsar-admin"), args...)
	cmd.Dir = caller
	cmd.Env = append(os.Environ(), "FOLDLINE_CACHE="+cache, "FOLDLINE_STACK_DIR="+t.TempDir(), "FOLDLINE_PULSAR_ADMIN_URL=http://admin.invalid:1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/pulsar-admin: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := []string{"--admin-url", "http://admin.invalid:1", "functions", "create",
		"--function-config-file", filepath.Join(caller, "manifests/functions/validate.yaml"),
		"--go", filepath.Join(caller, "fn"),
		"--jar=" + filepath.Join(caller, "with space.jar"),
		"--py", "missing.py",
		"--path", "/abs/already",
		"--name", "fn",
		"--secrets", secrets,
		"--user-config", "",
	}
	if !slices.Equal(got, want) {
		t.Errorf("pulsar-admin got\n%q\nwant\n%q", got, want)
	}
}
