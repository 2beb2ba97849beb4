//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildProbe builds testdata/probe into dir, with cgo (linked dynamically)
// or without (statically, as Foldline builds function binaries).
func buildProbe(t *testing.T, dir string, cgo bool) string {
	t.Helper()
	if bin := os.Getenv(probeEnv); bin != "" && !cgo {
		return bin // built by the test that runs this one as another user
	}
	bin := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-o", bin, "./testdata/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if cgo {
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if out, err := build.CombinedOutput(); err != nil {
		if cgo {
			t.Skipf("no cgo build here: %v\n%s", err, out)
		}
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	if dynamic(bin) != cgo {
		t.Skipf("the probe built with cgo=%v came out with dynamic=%v", cgo, dynamic(bin))
	}
	return bin
}

// probeEnv names a static probe already built, for a run of the test as
// an ordinary user, who cannot build it.
const probeEnv = "FOLDLINE_SANDBOX_PROBE"

func TestStartConfines(t *testing.T) {
	for _, linking := range []string{"static", "dynamic"} {
		t.Run(linking, func(t *testing.T) { testStartConfines(t, linking == "dynamic") })
	}
}

// TestStartConfinesAsAnOrdinaryUser runs TestStartConfines's static case
// as the user nobody (65534), where the network namespace has to be owned
// by a user namespace of the process's own: this test binary and the
// probe, copied where nobody may run them, and the test run by that user.
// It needs root to become nobody; under CI=true a network left unconfined
// fails it, elsewhere it is skipped with the reason.
func TestStartConfinesAsAnOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 || os.Getenv(probeEnv) != "" {
		t.Skip("needs root, to run the test as nobody")
	}
	dir, err := os.MkdirTemp("", "sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	probe := buildProbe(t, dir, false)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(test, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, probe} {
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody's, as an ordinary user's cache is: the probe's root is made
	// beside it, with a copy of the probe (a file of root's, which nobody
	// may not link).
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(test, "-test.run=^TestStartConfines$/^static$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), probeEnv+"="+probe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TestStartConfines as nobody failed: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
	switch {
	case bytes.Contains(out, []byte("environment, files, network, signals and Unix sockets confined")):
	case os.Getenv("CI") == "true":
		t.Fatalf("as nobody, the probe's network was not confined:\n%s", out)
	default:
		t.Skipf("as nobody, the probe's network was not confined here (see the output above)")
	}
}

func testStartConfines(t *testing.T, cgo bool) {
	bin := buildProbe(t, t.TempDir(), cgo)
	dir := t.TempDir()
	secret := filepath.Join(dir, "pulsar-secret.key")
	if err := os.WriteFile(secret, []byte("the superuser's key"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A named Unix socket anyone may connect to.
	socketDir, err := os.MkdirTemp("", "sandbox-socket-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(socketDir) })
	socket := filepath.Join(socketDir, "bus")
	u, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, path := range []string{socketDir, socket} {
		if err := os.Chmod(path, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	t.Setenv("FOLDLINE_PULSAR_TOKEN", "a superuser token")
	t.Setenv("GOGC", "300")

	cmd := exec.Command(bin, secret, dir, l.Addr().String(), strconv.Itoa(sleeper.Process.Pid), socket)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	c, err := Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the confined probe failed: %v\n%s%s", err, out.String(), errOut.String())
	}
	t.Logf("confinement: %s; the probe found %s", c, out.String())
	// What testdata/probe found it could do: the error of each attempt
	// by name, "" when it worked, and its environment.
	var p map[string]any
	if err := json.NewDecoder(&out).Decode(&p); err != nil {
		t.Fatalf("reading what the probe found: %v\n%s", err, out.String())
	}
	found := func(attempt string) string {
		text, ok := p[attempt].(string)
		if !ok {
			t.Fatalf("the probe says nothing of %s: %v", attempt, p)
		}
		return text
	}
	var env []string
	for _, kv := range p["Env"].([]any) {
		env = append(env, kv.(string))
	}
	wantEnv := []string{"GOGC=300"}
	if kv, ok := maxProcsEnv("", runtime.GOMAXPROCS(0), runtime.NumCPU()); ok {
		wantEnv = append(wantEnv, kv) // under a CPU limit
	}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("the probe's environment is %q, want only %q", env, wantEnv)
	}
	if !c.Files {
		if abi, err := abiVersion(); err == nil {
			t.Fatalf("this kernel has Landlock (ABI %d), and the probe's files were not confined: %s", abi, c)
		}
		t.Skipf("files and network not confined here: %s", c.Missing)
	}
	denied := func(what, got string) {
		t.Helper()
		switch {
		case got == "":
			t.Errorf("%s: allowed, want refused", what)
		case c.Root && strings.Contains(got, syscall.ENOENT.Error()):
			// Out of reach: no such path under its root.
		case !strings.Contains(got, fs.ErrPermission.Error()) && !strings.Contains(got, "operation not permitted"):
			t.Errorf("%s: %s, want a permission error", what, got)
		}
	}
	denied("reading a file of the caller's", found("ReadFile"))
	denied("listing a folder of the caller's", found("ListDir"))
	denied("writing a file", found("WriteFile"))
	denied("executing /bin/sh", found("Exec"))
	if _, err := os.Stat(filepath.Join(dir, "written")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the probe wrote a file (%v)", err)
	}
	if c.TCP || c.Network {
		denied("connecting over TCP", found("Connect"))
	}
	if c.Network && found("ConnectMPTCP") == "" {
		// Refused, or unreachable: no interface is up.
		t.Error("connecting over multipath TCP: allowed, want refused")
	}
	if c.Scoped {
		denied("signalling a process of the caller's", found("Signal"))
	}
	if c.Root {
		denied("connecting to a named Unix socket", found("ConnectUnix"))
	} else if !strings.Contains(c.Missing, "named Unix sockets not confined") {
		t.Errorf("no root of its own, and the confinement does not say so: %s", c)
	}
	// The time zone database, as deployed, when the host has it.
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Paris"); err == nil {
		if tz := found("TimeZone"); tz != "" {
			t.Errorf("loading a time zone: %s", tz)
		}
	}
}

// fakeBinary writes a file that stands for a binary (never run) in a
// directory of its own, and returns both.
func fakeBinary(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "fn")
	if err := os.WriteFile(bin, []byte("not run"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// TestRootSweepsStaleLinks leaves a link in a root's bin as a command that
// died before removing it would: a later process using the root removes
// it once it is an hour old by its change time (which the link set), not by
// its modification time (its binary's, as old as the build).
func TestRootSweepsStaleLinks(t *testing.T) {
	_, bin := fakeBinary(t)
	built := time.Now().Add(-2 * staleAfter)
	if err := os.Chtimes(bin, built, built); err != nil {
		t.Fatal(err)
	}
	r, err := newRoot(bin) // a start under way: its link is fresh
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	sweep := func(now time.Time) {
		old := sweepNow
		sweepNow = func() time.Time { return now }
		defer func() { sweepNow = old }()
		swept.Delete(r.dir)
		sweepOnce(r.dir)
	}
	sweep(time.Now())
	if _, err := os.Stat(r.link); err != nil {
		t.Fatalf("the link of a start under way was removed: %v", err)
	}
	sweep(time.Now().Add(staleAfter + time.Minute))
	if _, err := os.Stat(r.link); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a link an hour old is still there (%v)", err)
	}
}

// TestRootMadeAtOnce makes the root of one binary from several goroutines
// at once, as commands started together would: each gets it whole, with
// the time zone database in it.
func TestRootMadeAtOnce(t *testing.T) {
	dir, bin := fakeBinary(t)
	roots := make([]*root, 4)
	errs := make([]error, len(roots))
	var wg sync.WaitGroup
	for i := range roots {
		wg.Go(func() { roots[i], errs[i] = newRoot(bin) })
	}
	wg.Wait()
	for i, r := range roots {
		if errs[i] != nil {
			t.Fatalf("newRoot %d: %v", i, errs[i])
		}
		defer r.release()
		if r.dir != roots[0].dir {
			t.Errorf("root %d is %s, root 0 %s", i, r.dir, roots[0].dir)
		}
		if _, err := os.Stat(r.link); err != nil {
			t.Errorf("root %d: its binary's link: %v", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(zoneinfo, "Europe/Paris")); err == nil {
		if _, err := os.Stat(roots[0].path(filepath.Join(zoneinfo, "Europe/Paris"))); err != nil {
			t.Errorf("the root lacks the time zone database: %v", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".foldline-root-tmp-") {
			t.Errorf("a root half made is left: %s", e.Name())
		}
	}
}

// TestStartWithoutChroot stands for a system call filter that lets a
// process make namespaces but not chroot: the binary then runs without a
// root of its own, and the confinement says so, instead of not starting.
func TestStartWithoutChroot(t *testing.T) {
	if _, err := netnsFlags(); err != nil {
		t.Skipf("no namespaces here: %v", err)
	}
	bin := buildProbe(t, t.TempDir(), false)
	old := chrootErr
	chrootErr = func() error { return errors.New("chroot: operation not permitted") }
	t.Cleanup(func() { chrootErr = old })
	cmd := exec.Command(bin, "/nonexistent", t.TempDir(), "127.0.0.1:1", strconv.Itoa(os.Getpid()), "/nonexistent.sock")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the probe failed: %v\n%s", err, out.String())
	}
	if c.Root || !strings.Contains(c.Missing, "named Unix sockets not confined (chroot: operation not permitted)") {
		t.Errorf("confinement %q, want no root and the reason", c)
	}
}
