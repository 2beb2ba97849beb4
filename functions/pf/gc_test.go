package pf

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	settings := func() (int, int64) {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p, debug.SetMemoryLimit(-1)
	}
	noEnv := func(string) string { return "" }

	tuneGC(&instanceConf{GCPercent: 250, MemoryLimitMB: 100}, noEnv)
	if p, l := settings(); p != 250 || l != 100<<20 {
		t.Errorf("from user config: GC percent %d, memory limit %d; want 250, %d", p, l, 100<<20)
	}
	tuneGC(&instanceConf{GCPercent: 400, MemoryLimitMB: 0}, noEnv)
	if p, l := settings(); p != 400 || l != math.MaxInt64 {
		t.Errorf("memoryLimitMB 0: GC percent %d, memory limit %d; want 400 and no limit", p, l)
	}
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(77 << 20)
	tuneGC(&instanceConf{GCPercent: 400, MemoryLimitMB: 256}, func(k string) string { return map[string]string{"GOGC": "123", "GOMEMLIMIT": "77MiB"}[k] })
	if p, l := settings(); p != 123 || l != 77<<20 {
		t.Errorf("with GOGC and GOMEMLIMIT set: GC percent %d, memory limit %d; want both left alone", p, l)
	}
}
