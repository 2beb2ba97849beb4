package backfillrecord

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/cqlx/cqlxtest"
)

func newStore(t *testing.T) Store {
	t.Helper()
	session, ks := cqlxtest.Keyspace(t, "bfrectest")
	s := Store{CQL: session, Keyspace: ks}
	if err := s.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func running(view, table string) *Record {
	return &Record{View: view, Table: table, State: StateRunning, StartedAt: time.Now().UTC()}
}

// claims runs one Claim per table at once and returns how many won.
func claims(t *testing.T, s Store, view string, tables []string) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  int
		errs []error
	)
	start := make(chan struct{})
	for _, table := range tables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			holder, err := s.Claim(t.Context(), running(view, table))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case holder == nil:
				won++
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("claiming: %v", err)
	}
	return won
}

// TestClaim checks, against the real Cassandra, that a view never has two
// backfills running, however their starts interleave.
func TestClaim(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()

	t.Run("one after another", func(t *testing.T) {
		if holder, err := s.Claim(ctx, running("a", "a_v2")); err != nil || holder != nil {
			t.Fatalf("first claim: holder %v, err %v; want it won", holder, err)
		}
		holder, err := s.Claim(ctx, running("a", "a_v2"))
		if err != nil || holder == nil || holder.Table != "a_v2" {
			t.Fatalf("claim of the same table: holder %v, err %v; want a_v2 holding it", holder, err)
		}
		holder, err = s.Claim(ctx, running("a", "a_v3"))
		if err != nil || holder == nil || holder.Table != "a_v2" {
			t.Fatalf("claim of another table: holder %v, err %v; want a_v2 holding the view", holder, err)
		}
		got, err := s.Unfinished(ctx, "a")
		if err != nil || got == nil || got.Table != "a_v2" {
			t.Fatalf("running backfill of a: %v, %v; want only a_v2", got, err)
		}
		lost, err := s.ByTable(ctx, "a", "a_v3")
		if err != nil || lost == nil || lost.State != StateAborted || lost.Error == "" {
			t.Fatalf("record of the claim that gave way: %+v, %v; want aborted with a reason", lost, err)
		}
	})

	t.Run("a table reused after an abort", func(t *testing.T) {
		rec := running("b", "b_v2")
		if holder, err := s.Claim(ctx, rec); err != nil || holder != nil {
			t.Fatalf("claim: holder %v, err %v", holder, err)
		}
		rec.State = StateAborted
		if err := s.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if holder, err := s.Claim(ctx, running("b", "b_v2")); err != nil || holder != nil {
			t.Fatalf("claim of an aborted backfill's table: holder %v, err %v; want it won", holder, err)
		}
	})

	t.Run("a record that is gone", func(t *testing.T) {
		err := s.Put(ctx, running("e", "e_v2"))
		if err == nil || !strings.Contains(err.Error(), "is gone") {
			t.Fatalf("Put of a record never claimed: %v; want an error saying it is gone", err)
		}
		if records, err := s.List(ctx, "e"); err != nil || len(records) != 0 {
			t.Fatalf("records of e after the refused Put: %v, %v; want none", records, err)
		}
	})

	t.Run("racing starts of the same table", func(t *testing.T) {
		tables := []string{"c_v2", "c_v2", "c_v2", "c_v2", "c_v2", "c_v2"}
		if won := claims(t, s, "c", tables); won != 1 {
			t.Fatalf("%d of %d racing claims of one table won, want exactly 1", won, len(tables))
		}
	})

	t.Run("racing starts of different tables", func(t *testing.T) {
		for round := range 5 {
			view := fmt.Sprintf("d%d", round)
			var tables []string
			for v := 2; v < 8; v++ {
				tables = append(tables, fmt.Sprintf("%s_v%d", view, v))
			}
			if won := claims(t, s, view, tables); won > 1 {
				t.Fatalf("round %d: %d racing claims of view %s won, want at most 1", round, won, view)
			}
			records, err := s.List(ctx, view)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range records {
				if r.State == StateRunning {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("round %d: %d backfills of %s recorded as running", round, n, view)
			}
		}
	})
}

func TestTableVersion(t *testing.T) {
	for table, want := range map[string]int{"user_activity_v2": 2, "v_v10": 10, "x_v007": 7} {
		if n, ok := TableVersion(table); !ok || n != want {
			t.Errorf("TableVersion(%q) = %d, %v; want %d", table, n, ok, want)
		}
	}
	for _, table := range []string{"user_activity", "x_v", "x_v-1", "x_v2b", "x_v+3"} {
		if n, ok := TableVersion(table); ok {
			t.Errorf("TableVersion(%q) = %d, true; want no version", table, n)
		}
	}
}

// A backfill running on the cluster has a runner beside its copy's sink,
// reading its job topic; once it is over, or on another engine, none.
func TestRunner(t *testing.T) {
	stages := []StageRef{
		{Kind: "function", Name: "validate-bf-v_v2", Tenant: "shop", Namespace: "pipeline"},
		{Kind: "sink", Name: "v_v2-sink", Tenant: "shop", Namespace: "pipeline"},
	}
	r := &Record{State: StateRunning, Engine: "cluster", Stages: stages}
	runner := r.Runner()
	if runner == nil || runner.FullName() != "shop/pipeline/v_v2-sink-runner" || runner.SubName != runner.Name ||
		len(runner.Inputs) != 1 || runner.Inputs[0] != "persistent://shop/pipeline/v_v2-sink-runner-job" {
		t.Fatalf("runner %+v", runner)
	}
	for _, other := range []*Record{
		{State: StateSwitched, Engine: "cluster", Stages: stages},
		{State: StateRunning, Engine: "fused", Stages: stages},
	} {
		if got := other.Runner(); got != nil {
			t.Errorf("%s %s backfill: runner %+v, want none", other.State, other.Engine, got)
		}
	}
}
