package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// probe is what the confined child (TestConfinedChild) found it could do:
// each field the error of the attempt, "" when it succeeded.
type probe struct {
	Env       []string
	ReadFile  string
	ListDir   string
	WriteFile string
	Connect   string
	// ConnectMPTCP: dialling with multipath TCP.
	ConnectMPTCP string
	TimeZone     string
	Signal       string
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestConfinedChild is the confined process of TestStartConfines (this
// test binary started again, with "probe" and its targets as arguments).
func TestConfinedChild(t *testing.T) {
	if flag.Arg(0) != "probe" {
		t.Skip("the child of TestStartConfines")
	}
	secret, dir, addr := flag.Arg(1), flag.Arg(2), flag.Arg(3)
	other, err := strconv.Atoi(flag.Arg(4))
	if err != nil {
		t.Fatal(err)
	}
	var p probe
	p.Env = os.Environ()
	_, err = os.ReadFile(secret)
	p.ReadFile = errText(err)
	_, err = os.ReadDir(dir)
	p.ListDir = errText(err)
	p.WriteFile = errText(os.WriteFile(filepath.Join(dir, "written"), []byte("x"), 0o600))
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
	} else {
		p.Connect = err.Error()
	}
	// Multipath TCP, which Landlock does not refuse on Linux 6.18.
	mptcp := net.Dialer{Timeout: 2 * time.Second}
	mptcp.SetMultipathTCP(true)
	if conn, err := mptcp.Dial("tcp", addr); err == nil {
		conn.Close()
	} else {
		p.ConnectMPTCP = err.Error()
	}
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Paris"); err == nil {
		_, err = time.LoadLocation("Europe/Paris")
		p.TimeZone = errText(err)
	}
	// SIGURG, whose default action is to ignore it, to a process of the
	// caller's (Landlock lets a process signal its parent).
	p.Signal = errText(syscall.Kill(other, syscall.SIGURG))
	if err := json.NewEncoder(os.Stdout).Encode(p); err != nil {
		t.Fatal(err)
	}
}

func TestStartConfines(t *testing.T) {
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
	t.Setenv("FOLDLINE_PULSAR_TOKEN", "a superuser token")
	t.Setenv("GOGC", "300")

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	cmd := exec.Command(self, "-test.run=^TestConfinedChild$", "-test.count=1", "--", "probe", secret, dir, l.Addr().String(), strconv.Itoa(sleeper.Process.Pid))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	c, err := Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the confined child failed: %v\n%s%s", err, out.String(), errOut.String())
	}
	t.Logf("confinement: %s; the child found %s", c, out.String())
	var p probe
	if err := json.NewDecoder(&out).Decode(&p); err != nil {
		t.Fatalf("reading what the child found: %v\n%s", err, out.String())
	}
	if !slices.Equal(p.Env, []string{"GOGC=300"}) {
		t.Errorf("the child's environment is %q, want only GOGC=300", p.Env)
	}
	if !c.Files {
		t.Skipf("files and network not confined here: %s", c.Missing)
	}
	denied := func(what, got string) {
		t.Helper()
		if got == "" {
			t.Errorf("%s: allowed, want refused", what)
		} else if !bytes.Contains([]byte(got), []byte(fs.ErrPermission.Error())) && !bytes.Contains([]byte(got), []byte("operation not permitted")) {
			t.Errorf("%s: %s, want a permission error", what, got)
		}
	}
	denied("reading a file of the caller's", p.ReadFile)
	denied("listing a folder of the caller's", p.ListDir)
	denied("writing a file", p.WriteFile)
	if _, err := os.Stat(filepath.Join(dir, "written")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the child wrote a file (%v)", err)
	}
	if c.TCP || c.Network {
		denied("connecting over TCP", p.Connect)
	}
	if c.Network {
		// Refused, or unreachable: no interface is up.
		if p.ConnectMPTCP == "" {
			t.Error("connecting over multipath TCP: allowed, want refused")
		}
	}
	if c.Scoped {
		denied("signalling its parent", p.Signal)
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
