package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform/memview"
	"github.com/foldline/foldline/internal/testenv"
)

// testKeyspace connects to the local Cassandra and names a keyspace of the
// test's own, dropped when the test ends.
func testKeyspace(t testing.TB) (*gocql.Session, Settings, string) {
	t.Helper()
	svc := testenv.Cassandra(t)
	settings := Settings{Hosts: []string{svc.CassandraHost}, RetryBackoffMin: 20 * time.Millisecond, RetryBackoffMax: time.Second}.Defaults()
	user, password, err := svc.CassandraCredentials()
	if err != nil {
		t.Fatal(err)
	}
	settings.Username, settings.Password = user, password
	session, err := NewSession(settings)
	if err != nil {
		t.Fatal(err)
	}
	keyspace := fmt.Sprintf("sinktest_%d", rand.Uint64()%1_000_000_000)
	t.Cleanup(func() {
		if err := session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
			t.Errorf("dropping keyspace %s: %v", keyspace, err)
		}
		session.Close()
	})
	return session, settings, keyspace
}

func newTestApplier(t testing.TB, session *gocql.Session, s ViewSchema, settings Settings) *Applier {
	t.Helper()
	if err := EnsureSchema(t.Context(), session, s, settings.Replication); err != nil {
		t.Fatal(err)
	}
	a, err := NewApplier(session, s, settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// applyAll applies ops and fails the test on any error.
func applyAll(t testing.TB, a *Applier, ops []Op) Result {
	t.Helper()
	res := a.Apply(t.Context(), ops)
	for i, err := range res.Errs {
		if err != nil {
			t.Fatalf("applying operation %d: %v", i, err)
		}
	}
	return res
}

// readTable reads every live row of the view's table, keyed by rowKeyOf.
func readTable(t testing.TB, session *gocql.Session, v *compiledView) map[string]*rowState {
	t.Helper()
	var cols []string
	var dests []any
	for _, k := range v.schema.Key {
		cols = append(cols, quote(k.Name))
	}
	for i, c := range v.schema.Columns {
		cols = append(cols, quote(c.Name))
		dests = append(dests, v.colTypes[i].scanDest())
	}
	var deleted *bool
	var user string
	iter := session.Query(fmt.Sprintf("SELECT %s, %s FROM %s", strings.Join(cols, ", "), ColumnDeleted, v.schema.qualifiedTable())).
		WithContext(t.Context()).Iter()
	rows := map[string]*rowState{}
	for iter.Scan(append(append([]any{&user}, dests...), &deleted)...) {
		if deleted != nil && *deleted {
			continue
		}
		r := newRowState(len(v.colTypes))
		for i, t := range v.colTypes {
			r.values[i] = t.fromScan(dests[i])
		}
		rows[user] = r
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// checkTable compares the table with memview's fold of ops, each once.
func checkTable(t testing.TB, session *gocql.Session, v *compiledView, ops []Op) {
	t.Helper()
	ref := memview.New()
	for _, op := range ops {
		if err := ref.Apply(op.View.ViewOp()); err != nil {
			t.Fatal(err)
		}
	}
	got := readTable(t, session, v)
	want := ref.Rows(v.schema.View)
	if len(got) != len(want) {
		t.Errorf("table has %d live rows, the reference fold %d", len(got), len(want))
	}
	for _, w := range want {
		user := w.Key["user"].(string)
		r, ok := got[user]
		if !ok {
			t.Errorf("row %s is missing", user)
			continue
		}
		for i, c := range v.schema.Columns {
			if msg := compareWithReference(r.values[i], w.Columns[c.Name]); msg != "" {
				t.Errorf("row %s column %s: %s", user, c.Name, msg)
			}
		}
	}
}

// TestApplierExactlyOnceEffect replays the faults that at-least-once
// delivery produces against the real Cassandra and checks that the table
// always equals the reference fold of each operation applied once.
func TestApplierExactlyOnceEffect(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	ops := generateOps(rand.New(rand.NewPCG(3, 4)), 1500, 40, []string{"ledger-p0", "ledger-p1", "ledger-p2"})
	half := len(ops) / 2
	tests := []struct {
		name string
		// deliver hands the operations to appliers; restart gives a new
		// Applier with an empty cache, as after a crash.
		deliver func(t *testing.T, apply func([]Op), restart func())
	}{
		{name: "each operation once, in batches", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			for i := 0; i < len(ops); i += 100 {
				apply(ops[i:min(i+100, len(ops))])
			}
		}},
		{name: "the same operations twice", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			apply(ops)
			apply(ops)
		}},
		{name: "the same operations twice across a restart", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			apply(ops)
			restart()
			apply(ops)
		}},
		{name: "older operations redelivered after newer ones", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			apply(ops)
			restart()
			apply(ops[:half])
			apply(ops[half/2:])
		}},
		{name: "a crash in the middle of a batch", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			// The prefix reaches Cassandra, the acknowledgement does not;
			// after the restart the whole batch comes again.
			apply(ops[:half])
			restart()
			apply(ops)
		}},
		{name: "a batch redelivered within itself", deliver: func(t *testing.T, apply func([]Op), restart func()) {
			apply(append(append([]Op(nil), ops...), ops[:half]...))
		}},
	}
	for i, tt := range tests {
		for _, cache := range []int{0, -1} {
			name := tt.name + map[int]string{0: " (row cache)", -1: " (no row cache)"}[cache]
			t.Run(name, func(t *testing.T) {
				s := testSchema(keyspace)
				s.Table = fmt.Sprintf("exactly_once_%d_%d", i, -cache)
				st := settings
				st.RowCache = cache
				st.BatchSize = 1000
				a := newTestApplier(t, session, s, st)
				apply := func(batch []Op) { applyAll(t, a, batch) }
				restart := func() { a = newTestApplier(t, session, s, st) }
				tt.deliver(t, apply, restart)
				checkTable(t, session, a.view, ops)
			})
		}
	}
}

// TestApplierPipelinedBatches starts overlapping batches (each redelivers
// half of the one before) without waiting, so a row's writes of several
// batches queue behind each other (one worker writing a row per request
// makes sure of it) and fold into shared writes, and checks the table
// against the reference fold of each operation once.
func TestApplierPipelinedBatches(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	ops := generateOps(rand.New(rand.NewPCG(5, 6)), 1500, 40, []string{"ledger-p0", "ledger-p1"})
	for i, workers := range []int{1, settings.Concurrency} {
		for _, cache := range []int{0, -1} {
			t.Run(fmt.Sprintf("concurrency=%d,row_cache=%d", workers, cache), func(t *testing.T) {
				s := testSchema(keyspace)
				s.Table = fmt.Sprintf("pipelined_%d_%d", i, -cache)
				st := settings
				st.RowCache = cache
				st.Concurrency = workers
				if workers == 1 {
					st.RowsPerWrite = 1
				}
				a := newTestApplier(t, session, s, st)
				var started []*Pending
				for i := 0; i < len(ops); i += 100 {
					started = append(started, a.Start(t.Context(), ops[max(i-50, 0):min(i+100, len(ops))]))
				}
				for _, p := range started {
					for i, err := range p.Wait().Errs {
						if err != nil {
							t.Fatalf("operation %d: %v", i, err)
						}
					}
				}
				checkTable(t, session, a.view, ops)
			})
		}
	}
}

func TestApplierDeleteThenStaleUpsert(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	s := testSchema(keyspace)
	settings.RowCache = -1 // every Apply reads the row: the tombstone must be in Cassandra
	a := newTestApplier(t, session, s, settings)
	create := upsert("u1", "p0", 1).col("views", envelope.MergeAdd, 3).col("mood", envelope.MergeLatest, "happy").op()
	remove := deletion("u1", "p0", 2).op()
	applyAll(t, a, []Op{create})
	applyAll(t, a, []Op{remove})
	res := applyAll(t, a, []Op{create})
	if res.Redelivered != 1 || res.Rows != 0 {
		t.Errorf("redelivering the upsert: %+v, want it recognised as applied and nothing written", res)
	}
	checkTable(t, session, a.view, []Op{create, remove})
	// A newer upsert after the delete starts a fresh row.
	again := upsert("u1", "p0", 3).col("views", envelope.MergeAdd, 1).op()
	applyAll(t, a, []Op{again})
	checkTable(t, session, a.view, []Op{create, remove, again})
}

func TestApplierRejectsBadOperationsAndAppliesTheRest(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	a := newTestApplier(t, session, testSchema(keyspace), settings)
	good := upsert("u1", "p0", 1).col("views", envelope.MergeAdd, 1).op()
	unknown := upsert("u1", "p0", 2).col("clicks", envelope.MergeAdd, 1).op()
	overflow := upsert("u1", "p0", 3).col("views", envelope.MergeAdd, int64(1)<<62).op()
	overflow2 := upsert("u1", "p0", 4).col("views", envelope.MergeAdd, int64(1)<<62).op()
	last := upsert("u1", "p0", 5).col("url", envelope.MergeSet, "/last").op()
	res := a.Apply(t.Context(), []Op{good, unknown, overflow, overflow2, last})
	for i, wantRejected := range []bool{false, true, false, true, false} {
		if got := errors.Is(res.Errs[i], ErrRejected); got != wantRejected || (!wantRejected && res.Errs[i] != nil) {
			t.Errorf("operation %d: err = %v, want rejected=%v", i, res.Errs[i], wantRejected)
		}
	}
	checkTable(t, session, a.view, []Op{good, overflow, last})
}

// TestApplierWritesLargeRows applies rows too large to share a batch: the
// Applier must give them requests of their own, and when a batch is still
// refused (over batch_size_fail_threshold, 50 KiB by default, here forced
// by lifting batchBytes) fall back to writing its rows one at a time.
func TestApplierWritesLargeRows(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	settings.Concurrency = 1 // one worker takes ten rows at once
	big := strings.Repeat("x", 20<<10)
	for _, limit := range []int{batchBytes, 1 << 30} {
		t.Run(fmt.Sprint("batchBytes=", limit), func(t *testing.T) {
			s := testSchema(keyspace)
			s.Table = fmt.Sprintf("large_%d", limit)
			a := newTestApplier(t, session, s, settings)
			a.batchBytes = limit
			var ops []Op
			for i := range 10 {
				ops = append(ops, upsert(fmt.Sprint("u", i), "p0", int64(i+1)).col("url", envelope.MergeSet, big).op())
			}
			if res := applyAll(t, a, ops); res.Rows != len(ops) || res.Applied != len(ops) {
				t.Errorf("applying %d large rows: %+v, want every row written", len(ops), res)
			}
			checkTable(t, session, a.view, ops)
		})
	}
}

func TestEnsureSchemaRefusesADifferentTable(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	s := testSchema(keyspace)
	for range 2 { // creating, then checking what it created
		if err := EnsureSchema(t.Context(), session, s, settings.Replication); err != nil {
			t.Fatal(err)
		}
	}
	changed := s
	changed.Columns = append(append([]ValueColumn(nil), s.Columns[1:]...), ValueColumn{Name: "clicks", Type: "bigint", Merge: envelope.MergeAdd})
	changed.Columns[0].Type = "bigint" // best: int in the table
	err := EnsureSchema(t.Context(), session, changed, settings.Replication)
	var mismatch *SchemaMismatchError
	if !errors.As(err, &mismatch) || !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("EnsureSchema with another definition = %v, want a *SchemaMismatchError", err)
	}
	want := []string{
		"column best has type int, the definition wants bigint",
		"column clicks bigint is missing",
		"column views bigint (value) is not in the definition",
	}
	if fmt.Sprint(mismatch.Differences) != fmt.Sprint(want) {
		t.Errorf("differences = %q, want %q", mismatch.Differences, want)
	}
	other := Replication{"class": "SimpleStrategy", "replication_factor": "3"}
	if err := EnsureSchema(t.Context(), session, s, other); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("EnsureSchema with another replication = %v, want ErrSchemaMismatch", err)
	}
}

// TestDisruptiveApplierSurvivesCassandraRestart stops and restarts the
// shared Cassandra in the middle of the load, so it runs only in the serial
// phase of scripts/test (testenv.Disruptive).
func TestDisruptiveApplierSurvivesCassandraRestart(t *testing.T) {
	testenv.Disruptive(t)
	session, settings, keyspace := testKeyspace(t)
	s := testSchema(keyspace)
	a := newTestApplier(t, session, s, settings)
	ops := generateOps(rand.New(rand.NewPCG(5, 6)), 20000, 500, []string{"ledger-p0", "ledger-p1"})
	done := make(chan error, 1)
	go func() {
		for i := 0; i < len(ops); i += 200 {
			res := a.Apply(context.Background(), ops[i:min(i+200, len(ops))])
			for _, err := range res.Errs {
				if err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	testenv.Stack(t, "down", "cassandra")
	testenv.Stack(t, "up", "cassandra")
	if err := <-done; err != nil {
		t.Fatalf("applying across the restart: %v", err)
	}
	checkTable(t, session, a.view, ops)
}
