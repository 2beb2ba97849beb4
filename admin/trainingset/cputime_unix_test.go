//go:build unix

package trainingset

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system, every
// thread: what the sweep costs whatever else runs on the machine.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
