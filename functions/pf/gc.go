package pf

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
)

// The user config keys of the Go runtime's settings: the garbage
// collector's and the number of threads running Go code.
const (
	UserConfigGCPercent     = "gcPercent"
	UserConfigMemoryLimitMB = "memoryLimitMB"
	UserConfigMaxProcs      = "maxProcs"
)

// maxMaxProcs bounds maxProcs.
const maxMaxProcs = 1024

// RuntimeSettings are the Go runtime settings an instance runs with.
type RuntimeSettings struct {
	// GCPercent is GOGC's target percentage.
	GCPercent int
	// MemoryLimitMB is the soft memory limit in MiB; 0 sets none.
	MemoryLimitMB int
	// MaxProcs is GOMAXPROCS, the most threads running Go code at once;
	// 0 keeps Go's default (one per core). See tuneRuntime.
	MaxProcs int
}

// ParseRuntimeSettings reads gcPercent, memoryLimitMB and maxProcs from a user
// config, DefaultGCPercent, DefaultMemoryLimitMB and DefaultMaxProcs where
// they are unset. Each bad value is a *UserConfigError naming its key
// (joined when several are bad): foldline lint refuses what an instance
// would refuse to start with.
func ParseRuntimeSettings(uc map[string]any) (RuntimeSettings, error) {
	s := RuntimeSettings{GCPercent: DefaultGCPercent, MemoryLimitMB: DefaultMemoryLimitMB, MaxProcs: DefaultMaxProcs}
	procsErr := userCount(uc, UserConfigMaxProcs, &s.MaxProcs)
	if procsErr == nil && s.MaxProcs > maxMaxProcs {
		// Go makes a scheduler state per proc: a hostile count would
		// only exhaust the instance's memory.
		procsErr = &UserConfigError{Key: UserConfigMaxProcs, Reason: fmt.Sprintf("%d: want at most %d", s.MaxProcs, maxMaxProcs)}
	}
	err := errors.Join(userCount(uc, UserConfigGCPercent, &s.GCPercent), userCount(uc, UserConfigMemoryLimitMB, &s.MemoryLimitMB), procsErr)
	if err != nil {
		return RuntimeSettings{}, err
	}
	return s, nil
}

// tuneRuntime sets the garbage collector from the user config keys
// gcPercent and memoryLimitMB, and GOMAXPROCS from maxProcs, unless the
// process environment sets GOGC, GOMEMLIMIT or GOMAXPROCS (those win, as
// for any Go program).
//
// An instance's live heap is small (the receiver queue, a batch of outputs),
// so Go's default, a collection each time the heap doubles, spends much of
// the hot path's CPU collecting: about 11–15 % in profiles of the identity
// function and of the shop's stages. The default here, 400, collects when
// the heap has grown fivefold, and saved a sixth or more of the CPU per
// message in scripts/bench-runtime. The soft memory limit (160 MB by
// default) makes the collector run earlier once the heap nears it, so it
// sits well above the live heap: with the client settings' defaults (a
// receiver queue of 5000, 10 000 pending sends, see ClientSettings) the
// identity function's live heap is about 35 MB on 100-byte messages, and a
// limit of 48 MB makes it collect all the time (three times the CPU per
// message or more), one of 96 MB still every 60 MB or so of allocation (a
// tenth more CPU than at 160 MB). At 160 MB its resident memory is about
// 170 MB (280 MB without a limit; a plain pulsar-client-go loop with the
// same client settings and Go's default collector has 140–150 MB). A
// handler whose live heap nears the limit would collect all the time: it
// wants a higher memoryLimitMB (the Cassandra sink gets 512 from foldline
// deploy), or smaller client settings; 0 sets no limit.
//
// GOMAXPROCS (maxProcs) is left to Go (one thread per core) by default,
// 0. At 1 an instance spends 5–20 % less CPU on cores it shares with the
// broker, Cassandra and other instances (no second thread spinning for
// work, waking the first and being preempted), but can no longer receive,
// handle and send at once: the shop pipeline's p99 freshness and the fused
// backfill were worse (measurements in functions/pf/README.md). The
// environment's GOMAXPROCS wins.
func tuneRuntime(s RuntimeSettings, getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" && s.MaxProcs > 0 {
		runtime.GOMAXPROCS(s.MaxProcs)
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(s.GCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if s.MemoryLimitMB > 0 {
			limit = int64(s.MemoryLimitMB) << 20
		}
		debug.SetMemoryLimit(limit)
	}
}
