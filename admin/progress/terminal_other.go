//go:build !linux

package progress

import "os"

// isTerminal reports whether f is a character device: a terminal, or
// something like /dev/null taken for one.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
