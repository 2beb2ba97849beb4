package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tenant's credentials file is its owner's only, also when deploy
// rewrites one an older version (or a hand) left readable by others.
func TestWriteCredentialsMakesAnExistingFilePrivate(t *testing.T) {
	dir := t.TempDir()
	id := identity{Role: "tenant-shop", PulsarToken: "tok", CassandraUser: "tenant-shop", CassandraPassword: "pw", keyFile: filepath.Join(dir, "pulsar-secret.key")}
	old := filepath.Join(dir, "tenants", "shop.env")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("FOLDLINE_PULSAR_TOKEN=old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := id.writeCredentials("shop")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if path != old || info.Mode().Perm() != 0o600 || !strings.Contains(string(data), "FOLDLINE_PULSAR_TOKEN=tok\n") {
		t.Errorf("credentials %s: mode %v, content %q; want %s, -rw-------, the new token", path, info.Mode().Perm(), data, old)
	}
}
