// Package sandbox starts a tenant's function binary on this machine
// confined, for the commands that run a view's path locally (the fused
// backfill, foldline verify, foldline training-set): the code in it is the
// tenant's, and the command runs as whoever runs foldline, often with the
// superuser's credentials at hand (the local stack's key and tokens under
// $FOLDLINE_STACK_DIR/credentials, FOLDLINE_PULSAR_TOKEN in the
// environment). A confined process gets
//
//   - an environment of the Go runtime's settings only (Env): no
//     FOLDLINE_* credentials, no cloud keys, nothing else of the caller's;
//   - on Linux with Landlock (5.13 and later), no file access but reading
//     and executing its own binary (and the shared libraries, should it be
//     linked dynamically) and reading the time zone database, so no other
//     program to execute either; no TCP connection or port bound (Landlock
//     ABI 4, Linux 6.7); no abstract Unix socket or signal outside itself
//     (ABI 6, Linux 6.12);
//   - on Linux, a network namespace of its own with no interface up: no
//     network at all (one owned by a user namespace of its own, where the
//     kernel allows one, else, as root, a network namespace alone).
//     Landlock alone refuses TCP, but not UDP, nor (on Linux 6.18 here)
//     multipath TCP, which Go dials when asked: with Landlock alone,
//     TestStartConfines's probe reached the test's listener so;
//   - on Linux, for a static binary in a user namespace, a root directory
//     of its own (root_linux.go): Landlock never refuses connecting to a
//     named Unix socket the user can reach, and under its own root there
//     is none.
//
// It talks to its caller over the pipes it was started with. What is not
// confined on a machine is reported in Confinement, for the caller to say.
package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// envKept are the variables a confined process keeps: the Go runtime's own
// settings and the time zone.
var envKept = map[string]bool{
	"GOGC": true, "GOMEMLIMIT": true, "GOMAXPROCS": true, "GODEBUG": true, "GOTRACEBACK": true, "TZ": true,
}

// Env returns the variables of environ (KEY=value entries) a confined
// process keeps.
func Env(environ []string) []string {
	kept := []string{}
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && envKept[k] {
			kept = append(kept, kv)
		}
	}
	return kept
}

// Confinement says what confines a process started by Start.
type Confinement struct {
	// Files: no file access but its binary (and libraries) and the time
	// zone database.
	Files bool
	// TCP: no TCP connection or port bound (multipath TCP aside, see the
	// package doc).
	TCP bool
	// Scoped: no abstract Unix socket or signal outside itself.
	Scoped bool
	// Network: a network namespace of its own, with no interface up.
	Network bool
	// Root: a root directory of its own, with its binary and the time
	// zone database only: no named Unix socket to connect to.
	Root bool
	// Missing says what is not confined and why; "" when nothing is
	// missing but what Landlock never covers (see the package doc).
	Missing string
}

// String describes c in a line: what is confined, then what is not.
func (c Confinement) String() string {
	confined := []string{"environment"}
	if c.Files {
		confined = append(confined, "files")
	}
	switch {
	case c.Network:
		confined = append(confined, "network")
	case c.TCP:
		confined = append(confined, "TCP")
	}
	if c.Scoped {
		confined = append(confined, "signals")
	}
	if c.Root {
		confined = append(confined, "Unix sockets")
	}
	text := strings.Join(confined[:len(confined)-1], ", ")
	if len(confined) > 1 {
		text += " and "
	}
	text += confined[len(confined)-1] + " confined"
	if c.Missing != "" {
		text += "; " + c.Missing
	}
	return text
}

// lack adds what to c.Missing.
func (c *Confinement) lack(what string) {
	if c.Missing != "" {
		c.Missing += "; "
	}
	c.Missing += what
}

// Start starts cmd (its Path the binary, absolute) confined: its
// environment replaced by Env of this process's, and on Linux a Landlock
// domain over it. cmd.Env, when set, holds defaults of variables Env
// keeps, each used unless this process's environment sets it;
// cmd.SysProcAttr must be unset.
func Start(cmd *exec.Cmd) (Confinement, error) {
	if cmd.SysProcAttr != nil {
		return Confinement{}, fmt.Errorf("confining %s: the command sets its own process attributes", cmd.Path)
	}
	env := Env(os.Environ())
	for _, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !envKept[k] {
			return Confinement{}, fmt.Errorf("confining %s: the command sets %s, which a confined process does not keep", cmd.Path, k)
		}
		if _, set := os.LookupEnv(k); !set {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	if kv, ok := maxProcsEnv(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), runtime.NumCPU()); ok {
		cmd.Env = append(cmd.Env, kv)
	}
	return start(cmd)
}

// maxProcsEnv returns the GOMAXPROCS a confined process is given: this
// process's, when it runs under a CPU limit (procs below the cpus it may
// use) that the environment does not set (env). Go sizes itself to a
// container's CPU limit from files under /proc and /sys, which a confined
// process cannot read: without this it would take every core of the host.
// It wins over the function's maxProcs, as GOMAXPROCS always does.
func maxProcsEnv(env string, procs, cpus int) (string, bool) {
	if env != "" || procs >= cpus {
		return "", false
	}
	return "GOMAXPROCS=" + strconv.Itoa(procs), true
}
