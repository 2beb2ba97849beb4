package backfill

import (
	"os"
	"path/filepath"
	"testing"
)

// A runner writes the manifest directory its job carries (the manifests
// and the samples they name) as it was read, and
// refuses a path that would leave its directory: the job is a message on
// a topic of the tenant's, and a producer there could send another.
func TestManifestFilesRoundTrip(t *testing.T) {
	from := t.TempDir()
	for name, data := range map[string]string{"tenant.yaml": "kind: Tenant\n", "views/a.yaml": "kind: View\n", "notes.txt": "not a manifest"} {
		path := filepath.Join(from, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := manifestFiles(from)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files["views/a.yaml"] != "kind: View\n" || files["notes.txt"] != "not a manifest" {
		t.Fatalf("manifestFiles = %v, want the three files", files)
	}
	to := t.TempDir()
	if err := writeManifests(to, files); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(to, "views", "a.yaml")); err != nil || string(data) != "kind: View\n" {
		t.Errorf("views/a.yaml written as %q, %v", data, err)
	}
	for _, bad := range []string{"../escape.yaml", "/etc/x.yaml", "views/../../x.yaml"} {
		if err := writeManifests(t.TempDir(), map[string]string{bad: "kind: View\n"}); err == nil {
			t.Errorf("writeManifests wrote %q", bad)
		}
	}
}
