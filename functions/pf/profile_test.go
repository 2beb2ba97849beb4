package pf

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
)

func TestCPUProfileFromUserConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	details := baseDetails + `,"userConfig":` + quoteJSON(`{"cpuProfile":`+quoteJSON(path)+`}`) + `}`
	c, err := parseArgs([]string{"-instance-conf", detailsJSON(details)}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if c.CPUProfile != path {
		t.Fatalf("CPUProfile %q, want %q", c.CPUProfile, path)
	}
	stop, err := startCPUProfile(c.CPUProfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A finished profile is a gzipped protobuf: it starts with gzip's magic.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile of %d bytes does not start with gzip's magic", len(b))
	}
}

func TestNoCPUProfileByDefault(t *testing.T) {
	stop, err := startCPUProfile("")
	if err != nil {
		t.Fatal(err)
	}
	// Not profiling: starting a profile elsewhere still works.
	if err := pprof.StartCPUProfile(&strings.Builder{}); err != nil {
		t.Fatalf("a profile was running: %v", err)
	}
	pprof.StopCPUProfile()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestCPUProfileInAMissingDirectoryFails(t *testing.T) {
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.pprof")); err == nil || !strings.Contains(err.Error(), UserConfigCPUProfile) {
		t.Errorf("error %v, want one naming %q", err, UserConfigCPUProfile)
	}
}
