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
	"testing"
)

// probe is what testdata/probe found it could do: each field the error of
// the attempt, "" when it succeeded.
type probe struct {
	Env          []string
	ReadFile     string
	ListDir      string
	WriteFile    string
	Connect      string
	ConnectMPTCP string
	Exec         string
	TimeZone     string
	Signal       string
}

// buildProbe builds testdata/probe into dir, with cgo (linked dynamically)
// or without (statically, as Foldline builds function binaries).
func buildProbe(t *testing.T, dir string, cgo bool) string {
	t.Helper()
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

func TestStartConfines(t *testing.T) {
	for _, linking := range []string{"static", "dynamic"} {
		t.Run(linking, func(t *testing.T) { testStartConfines(t, linking == "dynamic") })
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
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	t.Setenv("FOLDLINE_PULSAR_TOKEN", "a superuser token")
	t.Setenv("GOGC", "300")

	cmd := exec.Command(bin, secret, dir, l.Addr().String(), strconv.Itoa(sleeper.Process.Pid))
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
	var p probe
	if err := json.NewDecoder(&out).Decode(&p); err != nil {
		t.Fatalf("reading what the probe found: %v\n%s", err, out.String())
	}
	wantEnv := []string{"GOGC=300"}
	if kv, ok := maxProcsEnv("", runtime.GOMAXPROCS(0), runtime.NumCPU()); ok {
		wantEnv = append(wantEnv, kv) // under a CPU limit
	}
	if !slices.Equal(p.Env, wantEnv) {
		t.Errorf("the probe's environment is %q, want only %q", p.Env, wantEnv)
	}
	if !c.Files {
		t.Skipf("files and network not confined here: %s", c.Missing)
	}
	denied := func(what, got string) {
		t.Helper()
		if got == "" {
			t.Errorf("%s: allowed, want refused", what)
		} else if !strings.Contains(got, fs.ErrPermission.Error()) && !strings.Contains(got, "operation not permitted") {
			t.Errorf("%s: %s, want a permission error", what, got)
		}
	}
	denied("reading a file of the caller's", p.ReadFile)
	denied("listing a folder of the caller's", p.ListDir)
	denied("writing a file", p.WriteFile)
	denied("executing /bin/sh", p.Exec)
	if _, err := os.Stat(filepath.Join(dir, "written")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the probe wrote a file (%v)", err)
	}
	if c.TCP || c.Network {
		denied("connecting over TCP", p.Connect)
	}
	if c.Network && p.ConnectMPTCP == "" {
		// Refused, or unreachable: no interface is up.
		t.Error("connecting over multipath TCP: allowed, want refused")
	}
	if c.Scoped {
		denied("signalling a process of the caller's", p.Signal)
	}
	if p.TimeZone != "" {
		t.Errorf("loading a time zone: %s", p.TimeZone)
	}
}

func TestEnvKeepsTheRuntimeSettingsOnly(t *testing.T) {
	got := Env([]string{"PATH=/usr/bin", "GOGC=400", "FOLDLINE_PULSAR_TOKEN=x", "AWS_SECRET_ACCESS_KEY=y", "GOMAXPROCS=1", "TZ=UTC", "GOGCX=1", "noequals"})
	want := []string{"GOGC=400", "GOMAXPROCS=1", "TZ=UTC"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
}

func TestMaxProcsFollowsACPULimit(t *testing.T) {
	for _, tt := range []struct {
		env         string
		procs, cpus int
		want        string
	}{
		{"", 2, 64, "GOMAXPROCS=2"}, // a container limited to 2 of 64 cores
		{"", 8, 8, ""},              // no limit: Go's own default
		{"4", 2, 64, ""},            // the environment's, kept by Env
	} {
		got, _ := maxProcsEnv(tt.env, tt.procs, tt.cpus)
		if got != tt.want {
			t.Errorf("maxProcsEnv(%q, %d, %d) = %q, want %q", tt.env, tt.procs, tt.cpus, got, tt.want)
		}
	}
}

func TestConfinementString(t *testing.T) {
	for _, tt := range []struct {
		c    Confinement
		want string
	}{
		{Confinement{Files: true, TCP: true, Scoped: true, Network: true}, "environment, files, network and signals confined"},
		{Confinement{Files: true, TCP: true, Scoped: true, Missing: "UDP not confined"}, "environment, files, TCP and signals confined; UDP not confined"},
		{Confinement{Missing: "files not confined"}, "environment confined; files not confined"},
	} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestStartRefusesACommandWithItsOwnEnvironment(t *testing.T) {
	cmd := exec.Command("/bin/true")
	cmd.Env = []string{"FOLDLINE_PULSAR_TOKEN=x"}
	if _, err := Start(cmd); err == nil {
		t.Fatal("started a command whose environment it would not have confined")
	}
}
