// Package plainfile reads files that someone else may have written with
// harm in mind (manifests from a pull request, a config file): regular
// files only — a symbolic link, FIFO, device or directory is refused
// without blocking on it, also when it is swapped in between the check and
// the read — and at most a given size.
package plainfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(info.Mode()))
	}
	checked := info
	beforeOpen(path)
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(fs.ModeSymlink))
		}
		return nil, err
	}
	defer f.Close()
	// The path may have been swapped since Lstat: check what was opened,
	// and that it is the file checked (where a symbolic link is followed,
	// a link swapped in opens its target, a regular file too).
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, Kind(info.Mode()))
	}
	if !os.SameFile(checked, info) {
		return nil, fmt.Errorf("%w (replaced while it was opened)", ErrNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, max)
	}
	return data, nil
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
