//go:build unix

package plainfile

import "syscall"

// openFlags open without following a symbolic link (the last element of the
// path) and without blocking on a FIFO.
const openFlags = syscall.O_NONBLOCK | noFollow

// noFollow is the flag of openFlags that refuses a symbolic link.
const noFollow = syscall.O_NOFOLLOW
