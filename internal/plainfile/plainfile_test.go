package plainfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(plain, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		max        int64
		want       error
	}{
		{name: "a plain file", path: plain, max: 100},
		{name: "a FIFO", path: fifo, max: 100, want: ErrNotRegular},
		{name: "a link to /dev/zero", path: link, max: 100, want: ErrNotRegular},
		{name: "a directory", path: dir, max: 100, want: ErrNotRegular},
		{name: "too large", path: plain, max: 2, want: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Read(tt.path, tt.max)
			if !errors.Is(err, tt.want) || (tt.want == nil && string(data) != "a: 1\n") {
				t.Errorf("Read = %q, %v; want %v", data, err, tt.want)
			}
		})
	}
}

// A FIFO swapped in after the check is opened without blocking and then
// refused: Read returns at once instead of waiting for a writer.
func TestReadDoesNotBlockOnAFIFOSwappedIn(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("opening a FIFO without blocking: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
}

// TestReadRefusesAFileSwappedIn swaps another regular file in between the
// check and the open: what was opened is not what was checked.
func TestReadRefusesAFileSwappedIn(t *testing.T) {
	dir := t.TempDir()
	path, other := filepath.Join(dir, "manifest.yaml"), filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("b: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	beforeOpen = func(p string) {
		if err := os.Rename(other, p); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeOpen = func(string) {} })
	data, err := Read(path, 100)
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Read of a file swapped in after the check = %q, %v; want %v", data, err, ErrNotRegular)
	}
	t.Log(err)
}
