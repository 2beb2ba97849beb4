// Package safego runs a component's goroutines so that a panic in one of
// them becomes an error the component's owner sees, rather than a crash of
// the whole process with no word to the owner or, recovered blindly, a
// component that silently stops working while callers wait on it.
package safego

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// ErrPanicked marks the error a recovered panic becomes.
var ErrPanicked = errors.New("goroutine panicked")

// Faults collects the first fault of a group of goroutines. The owner
// watches Done and, once it is closed, stops the component with Err. The
// zero value is not usable; make one with New.
type Faults struct {
	once sync.Once
	done chan struct{}
	err  error
}

// New returns a Faults with no fault yet.
func New() *Faults { return &Faults{done: make(chan struct{})} }

// Go runs fn in a goroutine; a panic in fn is reported as an error wrapping
// ErrPanicked that names the goroutine and carries the panic's value and
// stack.
func (f *Faults) Go(name string, fn func()) {
	go func() {
		defer f.Recover(name)
		fn()
	}()
}

// Recover, deferred at the top of a goroutine, reports a panic as Go does.
func (f *Faults) Recover(name string) {
	if v := recover(); v != nil {
		f.Report(fmt.Errorf("%w: %s: %v\n%s", ErrPanicked, name, v, debug.Stack()))
	}
}

// Report records err as the group's fault unless one was recorded before.
func (f *Faults) Report(err error) {
	f.once.Do(func() {
		f.err = err
		close(f.done)
	})
}

// Forward calls report with the fault once there is one, from a goroutine
// of its own that waits until then.
func (f *Faults) Forward(report func(error)) {
	go func() {
		<-f.done
		report(f.err)
	}()
}

// Done is closed once a fault is recorded.
func (f *Faults) Done() <-chan struct{} { return f.done }

// Err returns the recorded fault, nil while there is none.
func (f *Faults) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}
