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
// the heap has grown fivefold, and saved a sixth or more of the CPU per
// message in scripts/bench-runtime. The soft memory limit (48 MB by
// default) makes the collector run earlier once the heap nears it, which
// keeps the instance's resident memory under 64 MB (88 MB without it). A
// handler whose live heap nears the limit would collect all the time: it
// wants a higher memoryLimitMB (the Cassandra sink gets 512 from foldline
// deploy); 0 sets no limit.
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
