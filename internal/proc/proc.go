// Package proc reads what Linux's /proc says about processes: which ones
// run a given command, and how much CPU time and memory they use. Tests and
// benchmarks use it to find function instances the worker started and to
// measure where the CPU went.
package proc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PIDs returns the pids of the processes whose command line (program and
// arguments) match reports true for.
func PIDs(match func(argv []string) bool) []int {
	var pids []int
	Each(func(pid int, argv []string) {
		if match(argv) {
			pids = append(pids, pid)
		}
	})
	return pids
}

// Each calls fn with the pid and command line of every process it can
// read (a process that ends meanwhile is left out).
func Each(fn func(pid int, argv []string)) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		fn(pid, strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"))
	}
}

// clockTicks is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux this runs on).
const clockTicks = 100

// CPUTime returns the CPU time (user and system) that process pid has used
// so far, 0 when it is gone.
func CPUTime(pid int) time.Duration { return cpuTime(pid, false) }

func cpuTime(pid int, withChildren bool) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	ticks := utime + stime
	if withChildren && len(fields) >= 15 {
		cutime, _ := strconv.ParseInt(fields[13], 10, 64)
		cstime, _ := strconv.ParseInt(fields[14], 10, 64)
		ticks += cutime + cstime
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// CPUTimeWithChildren is CPUTime plus the CPU time of the process's
// children that have ended and been waited for (a local run's stages).
func CPUTimeWithChildren(pid int) time.Duration { return cpuTime(pid, true) }

// RSSKB returns the resident memory of process pid in kB, 0 when it is gone.
func RSSKB(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
