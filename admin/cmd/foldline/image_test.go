package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/foldline/foldline/admin/build"
	"github.com/foldline/foldline/internal/testenv"
)

// TestImageContentRunsInAnEmptyRoot lays out what the Dockerfile's scratch
// image holds — the static CLI, the prebuilt binaries, manifests/, the CA
// certificates — in an empty directory and runs the CLI chrooted there:
// lint and a plan against the real stack work without a Go toolchain, a
// shell or a libc. (No Docker daemon runs here to build the image itself.)
func TestImageContentRunsInAnEmptyRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	svc := testenv.Pulsar(t)
	testenv.Cassandra(t)
	root := t.TempDir()
	repo := testenv.RepoRoot()
	cli := exec.Command("go", "build", "-trimpath", "-ldflags=-w", "-o", filepath.Join(root, "foldline"), "./admin/cmd/foldline")
	cli.Dir, cli.Env = repo, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, out)
	}
	var log bytes.Buffer
	// As the Dockerfile does: the index signed with a key of the build's
	// own, whose public half the image carries as /binaries.pub.
	key := filepath.Join(t.TempDir(), "binaries.key")
	if err := build.Run(t.Context(), build.Options{Dir: filepath.Join(repo, "manifests"), Out: filepath.Join(root, "binaries"), SigningKey: key, Stdout: &log, Progress: &log}); err != nil {
		t.Fatalf("foldline build: %v\n%s", err, log.String())
	}
	if pub, err := os.ReadFile(key + ".pub"); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(root, "binaries.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "manifests"), os.DirFS(filepath.Join(repo, "manifests"))); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"etc/ssl/certs", "tmp", "home", "creds"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		if err := os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), ca, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=/home", "TMPDIR=/tmp", "FOLDLINE_PULSAR_URL=" + svc.PulsarURL, "FOLDLINE_PULSAR_ADMIN_URL=" + svc.PulsarAdminURL, "FOLDLINE_CASSANDRA=" + svc.CassandraHost}
	// The credentials, as a mounted secret would give them.
	for _, c := range []struct{ file, env string }{
		{svc.PulsarTokenFile, "FOLDLINE_PULSAR_TOKEN_FILE"},
		{svc.PulsarSecretKeyFile, "FOLDLINE_PULSAR_SECRET_KEY_FILE"},
		{svc.CassandraPasswordFile, "FOLDLINE_CASSANDRA_PASSWORD_FILE"},
	} {
		if c.file == "" {
			continue
		}
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		inside := "/creds/" + filepath.Base(c.file)
		if err := os.WriteFile(filepath.Join(root, inside), data, 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, c.env+"="+inside)
	}
	if svc.CassandraUser != "" {
		env = append(env, "FOLDLINE_CASSANDRA_USER="+svc.CassandraUser)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("/foldline", args...)
		cmd.Dir, cmd.Env = "/", env
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("foldline %s in the image's root: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("lint", "--skip-build", "/manifests"); !strings.Contains(out, "no problems") {
		t.Errorf("lint: %s", out)
	}
	tenant := "fltest-image"
	out := run("plan", "--binaries", "/binaries", "--binaries-key", "/binaries.pub", "--tenant", tenant, "/manifests")
	if !strings.Contains(out, "cluster: Pulsar "+svc.PulsarURL) || !strings.Contains(out, "function "+tenant+"/pipeline/validate") {
		t.Errorf("plan in the image's root:\n%s", out)
	}
	t.Logf("plan in the image's root:\n%s", out)
}
