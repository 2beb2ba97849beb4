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

// kubernetesMount lays out a file as a Kubernetes Secret or ConfigMap
// volume does: NAME → ..data/NAME, ..data → ..2024_01_01_00_00_00.1/, in
// which NAME is the regular file. It returns the path of NAME.
func kubernetesMount(t *testing.T, name string, content []byte, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	version := filepath.Join(dir, "..2024_01_01_00_00_00.1")
	if err := os.Mkdir(version, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(version, name), content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2024_01_01_00_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.Symlink(filepath.Join("..data", name), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadLinked follows links to a regular file, as a Kubernetes mount has
// them, and refuses what they lead to when that is no regular file.
func TestReadLinked(t *testing.T) {
	mounted := kubernetesMount(t, "config.yaml", []byte("a: 1\n"), 0o600)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	toFIFO, toZero, toDir := filepath.Join(dir, "to-fifo"), filepath.Join(dir, "to-zero"), filepath.Join(dir, "to-dir")
	for link, target := range map[string]string{toFIFO: fifo, toZero: "/dev/zero", toDir: dir} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, path string
		want       error
	}{
		{name: "a Kubernetes mount", path: mounted},
		{name: "a link to a FIFO", path: toFIFO, want: ErrNotRegular},
		{name: "a link to /dev/zero", path: toZero, want: ErrNotRegular},
		{name: "a link to a directory", path: toDir, want: ErrNotRegular},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, info, err := ReadLinked(tt.path, 100)
			if !errors.Is(err, tt.want) || (tt.want == nil && (string(data) != "a: 1\n" || info.Mode().Perm() != 0o600)) {
				t.Errorf("ReadLinked = %q, %v, %v; want %v", data, info, err, tt.want)
			}
		})
	}
	if _, err := Read(mounted, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Read of a link = %v, want %v: Read still refuses links", err, ErrNotRegular)
	}
}

// WriteAtomic gives the file the mode asked for, also when it replaces a
// file that had a wider one.
func TestWriteAtomicReplacesTheMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.env")
	if err := os.WriteFile(path, []byte("OLD=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(path, []byte("NEW=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if info.Mode().Perm() != 0o600 || string(data) != "NEW=1\n" {
		t.Errorf("after WriteAtomic: mode %v, content %q; want -rw------- and NEW=1", info.Mode().Perm(), data)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("WriteAtomic left %d files in the folder, want 1", len(entries))
	}
	if !SharedMode(0o644) || !SharedMode(0o640) || SharedMode(0o600) || SharedMode(0o700) {
		t.Error("SharedMode: want true for group- or world-readable modes only")
	}
}
