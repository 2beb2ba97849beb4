//go:build linux

package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulePathBeneath is LANDLOCK_RULE_PATH_BENEATH.
const rulePathBeneath = 1

// fileRights are the rights Landlock grants on a file (not a directory).
const fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
	unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

// readable are read beneath by every confined process, when they exist:
// the time zone database, so that a transformation that names a zone
// behaves as it does deployed.
var readable = []string{"/usr/share/zoneinfo", "/etc/localtime"}

// libraries are read and executed beneath by a confined process of a
// dynamically linked binary (see dynamic), when they exist: the dynamic
// loader and the shared libraries (Foldline builds static binaries; a test
// binary, or a prebuilt one, may not be). They hold no secret.
var libraries = []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache"}

// netnsFlags returns the clone flags that give a child a network namespace
// of its own, as this process may: one owned by a user namespace of the
// child's own (root, or an ordinary user where the kernel lets one make
// user namespaces), else a network namespace alone (it has CAP_SYS_ADMIN,
// but may make no user namespace: some containers). The child's user
// namespace maps no user: the child keeps its user to the kernel (its
// files, its binary), shows as the overflow user (65534) inside, and holds
// no capability once it executes its binary, as root neither. It asks
// once, by starting a program that does not exist with each set of flags
// in turn: ENOENT means the namespaces were made and only the program was
// missing.
var netnsFlags = sync.OnceValues(func() (uintptr, error) {
	var err error
	for _, flags := range []uintptr{syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET, syscall.CLONE_NEWNET} {
		_, err = syscall.ForkExec(noProgram, []string{noProgram}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: flags}})
		if errors.Is(err, syscall.ENOENT) {
			return flags, nil
		}
	}
	return 0, err
})

// chrootErr says whether a child cloned with flags (netnsFlags's, with a
// user namespace) may chroot: some system call filters let a process make
// namespaces but not chroot, and there a start with a root would fail,
// where one without runs. Asked once, as netnsFlags asks, chrooting to /.
var chrootErr = sync.OnceValue(func() error {
	flags, err := netnsFlags()
	if err != nil {
		return err
	}
	_, err = syscall.ForkExec(noProgram, []string{noProgram}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: flags, Chroot: "/"}})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("chroot: %w", err)
})

// noProgram is a path no program is at.
const noProgram = "/nonexistent/foldline-sandbox-probe"

// dynamic reports whether bin is linked dynamically (it names an ELF
// interpreter), and needs the libraries; a static binary, as Foldline
// builds them, gets no right beyond its own file and the readable paths,
// and so cannot execute anything else. A binary that is no ELF file is
// taken as static: it then fails to start, and says so.
func dynamic(bin string) bool {
	f, err := elf.Open(bin)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// fsRights returns the file system rights Landlock ABI abi knows, all of
// them handled (refused unless a rule grants them).
func fsRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// abiVersion returns the kernel's Landlock ABI version.
func abiVersion() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// start starts cmd under a Landlock domain and in a network namespace of
// its own (see the package doc), as far as this kernel and this process's
// privileges allow.
func start(cmd *exec.Cmd) (Confinement, error) {
	var c Confinement
	bin := cmd.Path
	flags, nsErr := netnsFlags()
	var r *root
	switch {
	case nsErr != nil:
		c.lack(fmt.Sprintf("named Unix sockets not confined (no user namespace: %v)", nsErr))
	case flags&syscall.CLONE_NEWUSER == 0:
		c.lack("named Unix sockets not confined (no user namespace)")
	case dynamic(bin):
		c.lack("named Unix sockets not confined (the binary is linked dynamically)")
	case chrootErr() != nil:
		c.lack(fmt.Sprintf("named Unix sockets not confined (%v)", chrootErr()))
	default:
		var err error
		if r, err = newRoot(bin); err != nil {
			c.lack(fmt.Sprintf("named Unix sockets not confined (%v)", err))
		} else {
			defer r.release()
		}
	}
	abi, abiErr := abiVersion()
	ruleset := -1
	if abiErr == nil {
		var err error
		if ruleset, err = newRuleset(abi, bin, r, &c); err != nil {
			return Confinement{}, err
		}
		defer unix.Close(ruleset)
	} else {
		// ENOSYS: a kernel without it; EOPNOTSUPP: built, but off at boot.
		c.lack(fmt.Sprintf("files and signals not confined: this kernel has no Landlock (%v)", abiErr))
	}
	if nsErr == nil {
		// No interface up in it: no network at all, where Landlock
		// refuses only TCP (and here not even multipath TCP).
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
		c.Network = true
		if r != nil {
			// The child chroots before it executes its binary, and
			// starts in its root: a working directory outside would
			// leave every relative path open.
			cmd.SysProcAttr.Chroot, cmd.Path, cmd.Dir = r.dir, r.bin, "/"
			c.Root = true
		}
	} else if c.TCP {
		c.lack(fmt.Sprintf("UDP and multipath TCP not confined (no network namespace: %v)", nsErr))
	} else {
		c.lack(fmt.Sprintf("network not confined (no network namespace: %v)", nsErr))
	}
	if ruleset < 0 {
		if err := cmd.Start(); err != nil {
			return Confinement{}, fmt.Errorf("starting %s: %w", bin, err)
		}
		return c, nil
	}
	// os/exec opens the null device for a stream left nil, which the
	// confined thread below could not.
	if cmd.Stdin == nil || cmd.Stdout == nil || cmd.Stderr == nil {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return Confinement{}, fmt.Errorf("opening %s for %s: %w", os.DevNull, bin, err)
		}
		defer null.Close()
		if cmd.Stdin == nil {
			cmd.Stdin = null
		}
		if cmd.Stdout == nil {
			cmd.Stdout = null
		}
		if cmd.Stderr == nil {
			cmd.Stderr = null
		}
	}
	started := make(chan error, 1)
	go func() {
		// The domain is the thread's, and the process forked from it
		// inherits it. The goroutine never unlocks the thread, so the
		// thread ends with it: no other goroutine ever runs confined.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- fmt.Errorf("confining %s: no_new_privs: %w", bin, err)
			return
		}
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
			started <- fmt.Errorf("confining %s: landlock_restrict_self: %w", bin, errno)
			return
		}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("starting %s confined: %w", bin, err)
			return
		}
		started <- nil
	}()
	if err := <-started; err != nil {
		return Confinement{}, err
	}
	return c, nil
}

// newRuleset makes the ruleset of a confined bin for Landlock ABI abi:
// every right it knows handled, and granted only to read and execute bin
// and the libraries, and to read the readable paths; in r's copies of
// them when bin runs in root r.
func newRuleset(abi int, bin string, r *root, c *Confinement) (int, error) {
	c.Files = true
	attr := unix.LandlockRulesetAttr{Access_fs: fsRights(abi)}
	if abi >= 4 {
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		c.TCP = true
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		c.Scoped = true
	} else {
		c.lack(fmt.Sprintf("abstract Unix sockets and signals not confined (Landlock ABI %d; 6, Linux 6.12, confines them)", abi))
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("confining %s: creating a Landlock ruleset: %w", bin, errno)
	}
	ruleset := int(fd)
	grant := func(path string, rights uint64) error {
		f, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(f)
		var st unix.Stat_t
		if err := unix.Fstat(f, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			rights &= fileRights
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: rights & attr.Access_fs, Parent_fd: int32(f)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), rulePathBeneath, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return errno
		}
		return nil
	}
	self := bin
	if r != nil {
		self = r.link // the same file, unless a copy
	}
	if err := grant(self, unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_READ_FILE); err != nil {
		unix.Close(ruleset)
		return -1, fmt.Errorf("confining %s: granting its own binary: %w", bin, err)
	}
	read := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	paths := map[string]uint64{}
	for _, path := range readable {
		if r != nil {
			path = r.path(path)
		}
		paths[path] = read
	}
	if dynamic(bin) {
		for _, path := range libraries {
			paths[path] = read | unix.LANDLOCK_ACCESS_FS_EXECUTE
		}
	}
	for path, rights := range paths {
		if err := grant(path, rights); err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(ruleset)
			return -1, fmt.Errorf("confining %s: granting %s: %w", bin, path, err)
		}
	}
	return ruleset, nil
}
