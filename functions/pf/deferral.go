package pf

import "sync"

// deferral is the outcome of an input whose handler called Defer: the
// handler (or something it started) reports it after the handler returned,
// possibly before the runtime has looked at the return value. The first
// outcome counts; later ones are ignored.
type deferral struct {
	mu      sync.Mutex
	outcome *error
	finish  func(error)
	done    bool
}

// complete reports the outcome; it runs the runtime's finish at once when the
// handler has already returned, or leaves the outcome for resolve.
func (d *deferral) complete(err error) {
	d.mu.Lock()
	if d.done || d.outcome != nil {
		d.mu.Unlock()
		return
	}
	if d.finish == nil {
		d.outcome = &err
		d.mu.Unlock()
		return
	}
	d.done = true
	finish := d.finish
	d.mu.Unlock()
	finish(err)
}

// resolve is called by the runtime once the handler returned successfully:
// finish runs with the outcome, now if it is known, or when it arrives.
func (d *deferral) resolve(finish func(error)) {
	d.mu.Lock()
	d.finish = finish
	if d.outcome == nil {
		d.mu.Unlock()
		return
	}
	d.done = true
	outcome := *d.outcome
	d.mu.Unlock()
	finish(outcome)
}
