package backfill

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/localrun"
)

func TestChooseEngine(t *testing.T) {
	for _, tc := range []struct {
		engine  string
		entries int64
		want    string
	}{
		{"", 10, EngineDeployed},
		{EngineAuto, fusedFromEntries - 1, EngineDeployed},
		{EngineAuto, fusedFromEntries, EngineFused},
		{EngineDeployed, 1 << 20, EngineDeployed},
		{EngineFused, 1, EngineFused},
		{EngineCluster, 1 << 20, EngineCluster},
	} {
		if got, err := chooseEngine(tc.engine, tc.entries); err != nil || got != tc.want {
			t.Errorf("chooseEngine(%q, %d) = %q, %v; want %q", tc.engine, tc.entries, got, err, tc.want)
		}
	}
	if _, err := chooseEngine("turbo", 1); !errors.Is(err, exitcode.ErrUsage) {
		t.Errorf("an unknown engine: %v, want a usage error", err)
	}
}

// TestThrottledReadsAtMostTheRate: --max-rate holds a fused run's reading
// to its rate on average (the events so far never come before they are
// due), passes every batch on unchanged, and stops waiting when the run's
// context ends.
func TestThrottledReadsAtMostTheRate(t *testing.T) {
	batches := func(n, size int) iter.Seq2[[]localrun.Message, error] {
		return func(yield func([]localrun.Message, error) bool) {
			for range n {
				if !yield(make([]localrun.Message, size), nil) {
					return
				}
			}
		}
	}
	start := time.Now()
	got := 0
	for events, err := range throttled(t.Context(), batches(4, 100), 2000) {
		if err != nil {
			t.Fatal(err)
		}
		got += len(events)
		if due := time.Duration(got-len(events)) * time.Second / 2000; time.Since(start) < due {
			t.Errorf("%d events had come after %s, before they were due at %s", got, time.Since(start), due)
		}
	}
	if got != 400 {
		t.Errorf("%d events, want 400", got)
	}
	if took, due := time.Since(start), 400*time.Second/2000; took < due {
		t.Errorf("400 events at 2000/s read in %s, want at least %s", took, due)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	for range throttled(ctx, batches(10, 1000), 1) { // 1000 s a batch, unless cancelled
		n++
		cancel()
	}
	if n != 1 {
		t.Errorf("%d batches after the context ended, want 1", n)
	}
}

// waitApplied returns once every submitted operation is answered, and,
// when the run's context ends first, without the answers the stopped
// batcher will never give.
func TestWaitAppliedEndsWithTheRun(t *testing.T) {
	var submitted sync.WaitGroup
	submitted.Add(2)
	go submitted.Done()
	go submitted.Done()
	waitApplied(t.Context(), &submitted) // both answered: returns

	ctx, cancel := context.WithCancel(t.Context())
	submitted.Add(1) // queued when the batcher stopped: never answered
	returned := make(chan struct{})
	go func() {
		waitApplied(ctx, &submitted)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("returned with an operation unanswered while the run goes on")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-returned // the test's own timeout catches a wait that never ends
}
