//go:build unix

package plainfile

import "syscall"

// openFlags open without following a symbolic link (the last element of the
// path) and without blocking on a FIFO.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOFOLLOW
