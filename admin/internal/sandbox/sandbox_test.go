package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

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
		{Confinement{Files: true, TCP: true, Scoped: true, Network: true, Root: true}, "environment, files, network, signals and Unix sockets confined"},
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

// A command's own variables are defaults of the Go runtime's settings:
// each is given unless this process's environment sets it.
func TestStartGivesDefaultsTheEnvironmentOverrides(t *testing.T) {
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env command")
	}
	t.Setenv("GOGC", "123")
	t.Setenv("GODEBUG", "")
	os.Unsetenv("GODEBUG")
	cmd := exec.Command(env)
	cmd.Env = []string{"GOGC=400", "GODEBUG=madvdontneed=0"}
	var out bytes.Buffer
	cmd.Stdout = &out
	if _, err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := strings.Fields(out.String())
	for _, want := range []string{"GOGC=123", "GODEBUG=madvdontneed=0"} {
		if !slices.Contains(got, want) {
			t.Errorf("the environment %q lacks %s", got, want)
		}
	}
	if slices.Contains(got, "GOGC=400") {
		t.Errorf("the command's default GOGC won over this process's: %q", got)
	}
}
