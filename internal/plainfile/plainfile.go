// Package plainfile reads files that someone else may have written with
// harm in mind (manifests from a pull request, a config file): regular
// files only — a FIFO, device or directory is refused without blocking on
// it, also when it is swapped in between the check and the read — and at
// most a given size. Read refuses symbolic links too (a manifest that
// links to a file outside the repository); ReadLinked follows them (a
// Kubernetes Secret or ConfigMap mount is a link into its ..data folder)
// and checks what they lead to.
//
// It also writes files that hold secrets: WriteAtomic replaces a file by
// a new one of the mode asked for, whatever the old one's was.
package plainfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is the error for a path that is not a plain file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error for a file larger than the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the regular file at path, of at most max
// bytes. It opens the file without following a symbolic link and without
// blocking (a FIFO opened for reading would wait for a writer), then checks
// what it opened.
func Read(path string, max int64) ([]byte, error) {
	data, _, err := read(path, max, os.Lstat, openFlags)
	return data, err
}

// ReadLinked is Read, but follows symbolic links, all the way: what the
// path leads to must be a regular file. It also returns the file's info
// (mode, owner), for callers that check who may read it.
func ReadLinked(path string, max int64) ([]byte, fs.FileInfo, error) {
	return read(path, max, os.Stat, openFlags&^noFollow)
}

func read(path string, max int64, stat func(string) (fs.FileInfo, error), flags int) ([]byte, fs.FileInfo, error) {
	info, err := stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(info.Mode()))
	}
	checked := info
	beforeOpen(path)
	f, err := os.OpenFile(path, os.O_RDONLY|flags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(fs.ModeSymlink))
		}
		return nil, nil, err
	}
	defer f.Close()
	// The path may have been swapped since Lstat: check what was opened,
	// and that it is the file checked (where a symbolic link is followed,
	// a link swapped in opens its target, a regular file too).
	if info, err = f.Stat(); err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(info.Mode()))
	}
	if !os.SameFile(checked, info) {
		return nil, nil, fmt.Errorf("%w (replaced while it was opened)", ErrNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > max {
		return nil, nil, fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, max)
	}
	return data, info, nil
}

// SharedMode reports whether a file's mode lets its group or others read
// it: a file that holds a secret should be its owner's only.
func SharedMode(mode fs.FileMode) bool { return mode.Perm()&0o044 != 0 }

// WriteAtomic replaces the file at path by one holding data, of mode
// perm: it writes a temporary file in the same folder, syncs it, and
// renames it over path, so that a reader sees the old content or the new,
// never a part, and the file has perm even when an older one had another
// mode (os.WriteFile keeps an existing file's).
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// beforeOpen is called between the check of path and its open: a test's
// chance to swap the file.
var beforeOpen = func(string) {}

// Kind names a file mode's type in words.
func Kind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode.IsDir():
		return "a directory"
	}
	return "mode " + mode.String()
}
