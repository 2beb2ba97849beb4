package progress

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal asks the kernel for f's terminal attributes, which only a
// terminal has.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
