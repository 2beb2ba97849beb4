//go:build linux

package sandbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// A static binary runs with a root directory of its own (chroot): its
// binary, a copy of the time zone database and of /etc/localtime, nothing
// else. Landlock has no right over connecting to a named Unix socket, and
// a process that may connect to the Docker daemon's or the user's D-Bus
// socket can start any program outside its confinement; under its own root
// no such path exists. The root is made once beside the binary (the
// builder's cache, the user's) and kept; each process started gets a hard
// link of its binary in it (a copy where the kernel refuses the link: a
// binary of another user's, under fs.protected_hardlinks), removed once
// the process runs. The process is chrooted by a clone into a user namespace,
// so that it holds no capability once it executes its binary: it cannot
// chroot again to leave its root.

// zoneinfo and localtime are the time zone database and the local zone
// that a root holds copies of, at the same paths.
const (
	zoneinfo  = "/usr/share/zoneinfo"
	localtime = "/etc/localtime"
)

// rootName is the name of the roots beside the binaries, with the digest
// of the time zone data they hold: a root made before the system's time
// zone data changed is no longer used.
var rootName = sync.OnceValues(func() (string, error) {
	h := sha256.New()
	for _, path := range []string{filepath.Join(zoneinfo, "tzdata.zi"), localtime} {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
	}
	return ".foldline-root-" + hex.EncodeToString(h.Sum(nil)[:8]), nil
})

// root is a confined binary's root directory and its binary in it.
type root struct {
	dir string
	// link is the binary's link (or copy) in dir; bin its path in the root.
	link, bin string
}

// newRoot makes the root a confined bin runs in (made once beside bin,
// then kept) and links bin into it.
func newRoot(bin string) (*root, error) {
	name, err := rootName()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(filepath.Dir(bin), name)
	if _, err := os.Stat(filepath.Join(dir, "bin")); errors.Is(err, fs.ErrNotExist) {
		err = makeRoot(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("making a root for %s: %w", bin, err)
	}
	sweepOnce(dir)
	var id [8]byte
	rand.Read(id[:])
	r := &root{dir: dir, bin: "/bin/" + hex.EncodeToString(id[:])}
	r.link = filepath.Join(dir, r.bin)
	if err := os.Link(bin, r.link); err != nil {
		if err := copyFile(bin, r.link, 0o700); err != nil {
			return nil, fmt.Errorf("putting %s in its root: %w", bin, err)
		}
	}
	return r, nil
}

// swept holds the roots whose stale links this process removed.
var swept sync.Map

// staleAfter is the age of a link in a root's bin that no start is still
// using: each is removed as soon as its process runs.
const staleAfter = time.Hour

// sweepNow is the time the sweep takes as now (a test's to move).
var sweepNow = time.Now

// sweepOnce removes, once per process and root, the links left in dir's
// bin by a command that died between a link and its removal (a copy holds a
// binary's size).
func sweepOnce(dir string) {
	if _, done := swept.LoadOrStore(dir, true); done {
		return
	}
	entries, err := os.ReadDir(filepath.Join(dir, "bin"))
	if err != nil {
		return
	}
	for _, e := range entries {
		// The change time, which a link sets: a link's modification time
		// is its binary's, as old as the build.
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && sweepNow().Sub(time.Unix(st.Ctim.Unix())) > staleAfter {
				os.Remove(filepath.Join(dir, "bin", e.Name()))
			}
		}
	}
}

// path is where the root's copy of a host path is.
func (r *root) path(host string) string { return filepath.Join(r.dir, host) }

// release removes the binary's link: the process runs it already.
func (r *root) release() { os.Remove(r.link) }

// makeRoot makes a root at dir, in a directory of its own renamed into
// place once complete: a root is never seen half made, and when two
// commands make it at once, one keeps its own.
func makeRoot(dir string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".foldline-root-tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // after a rename, nothing is left there
	if err := os.Mkdir(filepath.Join(tmp, "bin"), 0o700); err != nil {
		return err
	}
	if err := copyTree(zoneinfo, filepath.Join(tmp, zoneinfo)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The local zone's data, as a file (on the host it is often a link
	// into the database).
	if data, err := os.ReadFile(localtime); err == nil {
		if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(localtime)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, localtime), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "bin")); statErr == nil {
			return nil // made meanwhile by another command
		}
		return err
	}
	return nil
}

// copyTree copies the directories, regular files and symbolic links under
// src to dst. The links are copied as they are: in the root, a link to an
// absolute path of the database resolves within the root's copy of it.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, 0o644)
		}
		return nil // no device, FIFO or socket is copied
	})
}

// copyFile copies the regular file src to a new file dst of mode perm.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
