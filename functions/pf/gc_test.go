package pf

import (
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// keepRuntimeSettings restores this process's collector settings and
// GOMAXPROCS when t ends: tuneRuntime changes them for the whole process.
func keepRuntimeSettings(t *testing.T) {
	percent, limit, procs := debug.SetGCPercent(100), debug.SetMemoryLimit(-1), runtime.GOMAXPROCS(0)
	debug.SetGCPercent(percent)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit); runtime.GOMAXPROCS(procs) })
}

func TestTuneGC(t *testing.T) {
	keepRuntimeSettings(t)
	settings := func() (int, int64) {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p, debug.SetMemoryLimit(-1)
	}
	noEnv := func(string) string { return "" }

	tuneRuntime(RuntimeSettings{GCPercent: 250, MemoryLimitMB: 100}, noEnv)
	if p, l := settings(); p != 250 || l != 100<<20 {
		t.Errorf("from user config: GC percent %d, memory limit %d; want 250, %d", p, l, 100<<20)
	}
	tuneRuntime(RuntimeSettings{GCPercent: 400, MemoryLimitMB: 0}, noEnv)
	if p, l := settings(); p != 400 || l != math.MaxInt64 {
		t.Errorf("memoryLimitMB 0: GC percent %d, memory limit %d; want 400 and no limit", p, l)
	}
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(77 << 20)
	tuneRuntime(RuntimeSettings{GCPercent: 400, MemoryLimitMB: 256}, func(k string) string { return map[string]string{"GOGC": "123", "GOMEMLIMIT": "77MiB"}[k] })
	if p, l := settings(); p != 123 || l != 77<<20 {
		t.Errorf("with GOGC and GOMEMLIMIT set: GC percent %d, memory limit %d; want both left alone", p, l)
	}
}

func TestTuneMaxProcs(t *testing.T) {
	keepRuntimeSettings(t)
	noEnv := func(string) string { return "" }

	runtime.GOMAXPROCS(3)
	tuneRuntime(RuntimeSettings{GCPercent: DefaultGCPercent, MaxProcs: 1}, noEnv)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("maxProcs 1: GOMAXPROCS %d", n)
	}
	runtime.GOMAXPROCS(3)
	tuneRuntime(RuntimeSettings{GCPercent: DefaultGCPercent, MaxProcs: 0}, noEnv)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("maxProcs 0: GOMAXPROCS %d, want Go's own (3) left alone", n)
	}
	tuneRuntime(RuntimeSettings{GCPercent: DefaultGCPercent, MaxProcs: 1}, func(k string) string { return map[string]string{"GOMAXPROCS": "3"}[k] })
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("with GOMAXPROCS set: %d, want the environment's 3", n)
	}
}

func TestParseMaxProcs(t *testing.T) {
	for _, tc := range []struct {
		uc   map[string]any
		want int
		bad  bool
	}{
		{uc: nil, want: DefaultMaxProcs},
		{uc: map[string]any{UserConfigMaxProcs: 2.0}, want: 2},
		{uc: map[string]any{UserConfigMaxProcs: 0}, want: 0},
		{uc: map[string]any{UserConfigMaxProcs: -1}, bad: true},
		{uc: map[string]any{UserConfigMaxProcs: 1024}, want: 1024},
		{uc: map[string]any{UserConfigMaxProcs: 1e9}, bad: true},
		{uc: map[string]any{UserConfigMaxProcs: "many"}, bad: true},
	} {
		s, err := ParseRuntimeSettings(tc.uc)
		var uce *UserConfigError
		switch {
		case tc.bad && (!errors.As(err, &uce) || uce.Key != UserConfigMaxProcs):
			t.Errorf("%v: error %v, want a *UserConfigError naming %s", tc.uc, err, UserConfigMaxProcs)
		case !tc.bad && (err != nil || s.MaxProcs != tc.want):
			t.Errorf("%v: %+v, %v; want maxProcs %d", tc.uc, s, err, tc.want)
		}
	}
}
