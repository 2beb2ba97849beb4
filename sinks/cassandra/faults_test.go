package cassandra

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/safego"
)

// A worker that panics (here on a nil session, as a bug in reading a row
// would) becomes an error the sink stops with, instead of ending the process
// or leaving the batch's callers waiting forever.
func TestPanickingWorkerBecomesAFault(t *testing.T) {
	settings := Settings{Hosts: []string{"127.0.0.1"}}.Defaults()
	a, err := NewApplier(nil, testSchema("ks"), settings)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(t.Context(), []Op{upsert("ann", "persistent://t/n/ledger", 1).col("views", "add", 1).op()})
	assertFault(t, a.Faults(), "applying rows of activity_v1")
}

// panickingStarter's batches panic when waited on.
type panickingStarter struct{}

func (panickingStarter) Start(context.Context, []Op) *Pending { return nil }

func TestPanickingBatchBecomesAFault(t *testing.T) {
	b := NewBatcher(panickingStarter{}, Cut{Size: 1, Linger: time.Millisecond}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go b.Run(ctx)
	if err := b.SubmitAsync(ctx, upsert("ann", "persistent://t/n/ledger", 1).op(), func(error) {}); err != nil {
		t.Fatal(err)
	}
	assertFault(t, b.Faults(), "answering a batch")
}

func assertFault(t *testing.T, f *safego.Faults, name string) {
	t.Helper()
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no fault within 10 s")
	}
	if err := f.Err(); !errors.Is(err, safego.ErrPanicked) || !strings.Contains(err.Error(), name) {
		t.Errorf("fault %v, want ErrPanicked naming %q", err, name)
	}
}
