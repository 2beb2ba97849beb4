package pf

import (
	"math"
	"runtime/debug"
)

// tuneGC sets the garbage collector from the user config keys gcPercent and
// memoryLimitMB, unless the process environment sets GOGC or GOMEMLIMIT
// (those win, as for any Go program).
//
// An instance's live heap is small (the receiver queue, a batch of outputs),
// so Go's default, a collection each time the heap doubles, spends much of
// the hot path's CPU collecting: about 11–15 % in profiles of the identity
// function and of the shop's stages. The default here, 400, collects when
// the heap has grown fivefold, which costs a few MB and saved about a sixth
// of the CPU per message in scripts/bench-runtime. The soft memory limit
// (256 MB by default) makes the collector run earlier when a handler keeps
// a large live heap, so that 400 never means five times a large heap; 0
// sets no limit.
func tuneGC(c *instanceConf, getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(c.GCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if c.MemoryLimitMB > 0 {
			limit = int64(c.MemoryLimitMB) << 20
		}
		debug.SetMemoryLimit(limit)
	}
}
