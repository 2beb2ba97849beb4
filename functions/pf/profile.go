package pf

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// UserConfigCPUProfile names a file the instance writes a pprof CPU profile
// of its whole run to (`go tool pprof -top <binary> <file>`), for finding
// where an instance spends its CPU under the real worker: the runtime
// benchmark (scripts/bench-runtime -cpuprofile DIR) sets it on the identity
// function. The profile is complete once the instance has shut down
// (functions delete or stop). Off unless set.
const UserConfigCPUProfile = "cpuProfile"

// startCPUProfile starts profiling the CPU into path, when set; the returned
// func stops and writes it.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("user config key %q: %w", UserConfigCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("user config key %q: starting the CPU profile: %w", UserConfigCPUProfile, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing the CPU profile %s: %w", path, err)
		}
		return nil
	}, nil
}
