package services

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captureWarnings sends slog's default logger to a buffer for the test.
func captureWarnings(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	warned.Clear()
	t.Cleanup(func() {
		slog.SetDefault(old)
		warned.Clear()
	})
	return &buf
}

// A config file mounted from a Kubernetes Secret or ConfigMap is a link
// to ..data/config.yaml, itself a link into the current version's folder:
// it is read, not refused as a link.
func TestReadConfigFileFollowsAKubernetesMount(t *testing.T) {
	dir := t.TempDir()
	version := filepath.Join(dir, "..2024_01_01_00_00_00.1")
	if err := os.Mkdir(version, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(version, "config.yaml"), []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(version), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.Symlink("..data/config.yaml", path); err != nil {
		t.Fatal(err)
	}
	f, err := ReadConfigFile(path)
	if err != nil {
		t.Fatalf("reading a config file mounted the Kubernetes way: %v", err)
	}
	if f.CurrentContext != "local" || len(f.Contexts) != 2 {
		t.Errorf("read %+v, want the two contexts", f)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfigFile(filepath.Join(dir, "zero.yaml")); err == nil {
		t.Error("a link to /dev/zero was read as a config file")
	}
}

// A file that holds a secret and that others may read is warned about,
// once; one only its owner reads is not.
func TestLoadWarnsAboutSharedSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return path
	}
	sharedToken := write("shared.token", "tok\n", 0o644)
	privateKey := write("private.key", strings.Repeat("k", 32), 0o600)
	groupPassword := write("group.password", "pw\n", 0o640)
	sharedConfig := write("shared-config.yaml", "contexts:\n  - name: x\n    pulsar:\n      token: abc\n", 0o644)
	sharedPlainConfig := write("plain-config.yaml", "contexts:\n  - name: x\n    pulsar:\n      url: pulsar://h:6650\n", 0o644)
	t.Setenv("FOLDLINE_STACK_DIR", t.TempDir())

	tests := []struct {
		name       string
		env        env
		warn, keep []string
	}{
		{name: "files of secrets", env: env{"FOLDLINE_PULSAR_TOKEN_FILE": sharedToken, "FOLDLINE_PULSAR_SECRET_KEY_FILE": privateKey,
			"FOLDLINE_CASSANDRA_PASSWORD_FILE": groupPassword, "XDG_CONFIG_HOME": dir},
			warn: []string{sharedToken, groupPassword}, keep: []string{privateKey}},
		{name: "a config file with a token", env: env{"FOLDLINE_CONFIG": sharedConfig}, warn: []string{sharedConfig}},
		{name: "a config file without secrets", env: env{"FOLDLINE_CONFIG": sharedPlainConfig}, keep: []string{sharedPlainConfig}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := captureWarnings(t)
			for range 2 {
				if _, err := load(tt.env.get, true); err != nil {
					t.Fatal(err)
				}
			}
			for _, path := range tt.warn {
				if n := strings.Count(out.String(), "file="+path+" "); n != 1 {
					t.Errorf("%d warnings about %s, want 1:\n%s", n, path, out)
				}
			}
			for _, path := range tt.keep {
				if strings.Contains(out.String(), path) {
					t.Errorf("warned about %s:\n%s", path, out)
				}
			}
		})
	}
}
