//go:build !unix

package plainfile

// openFlags are none where the system has neither O_NOFOLLOW nor FIFOs
// that block an open (Windows): a symbolic link swapped in after Lstat is
// caught by Read comparing what it opened with what it checked.
const openFlags = 0

// noFollow is the flag of openFlags that refuses a symbolic link: none.
const noFollow = 0
