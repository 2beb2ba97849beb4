package safego

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPanicBecomesFault(t *testing.T) {
	f := New()
	if f.Err() != nil {
		t.Fatalf("Err() = %v before any fault", f.Err())
	}
	f.Go("worker", func() { panic("index out of range") })
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no fault reported within 10 s")
	}
	err := f.Err()
	if !errors.Is(err, ErrPanicked) || !strings.Contains(err.Error(), "worker: index out of range") {
		t.Errorf("Err() = %v, want ErrPanicked naming the worker and the panic", err)
	}
	f.Report(errors.New("later"))
	if f.Err() != err {
		t.Errorf("a later report replaced the first fault: %v", f.Err())
	}
}
