package rowestimate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

func viewSchema(keyspace string) cassandra.ViewSchema {
	return cassandra.ViewSchema{Keyspace: keyspace, Table: "visits_v1", View: "visits",
		Key:     []cassandra.KeyColumn{{Name: "user", Type: "text"}, {Name: "day", Type: "text"}},
		Columns: []cassandra.ValueColumn{{Name: "n", Type: "bigint", Merge: envelope.MergeAdd}}}
}

// The estimate reads the tokens of a bounded number of rows: never the
// whole table, whatever its size.
func TestStatementIsBounded(t *testing.T) {
	got := Statement(viewSchema("shop"))
	want := `SELECT token("user", "day"), "fl_deleted" FROM "shop"."visits_v1" LIMIT 1000`
	if got != want {
		t.Errorf("statement\n%s\nwant\n%s", got, want)
	}
}

func TestFromSample(t *testing.T) {
	cases := []struct {
		name      string
		n, live   int
		last      int64
		wantRows  int64
		wantExact bool
	}{
		{name: "empty table", wantExact: true},
		{name: "the whole table read: exact", n: 999, live: 990, last: math.MaxInt64, wantRows: 990, wantExact: true},
		{name: "half the ring holds the sample", n: 1000, live: 1000, last: -1, wantRows: 1998},
		{name: "a tenth deleted", n: 1000, live: 900, last: -1, wantRows: 1798},
		{name: "a quarter of the ring", n: 1000, live: 1000, last: math.MinInt64 / 2, wantRows: 3996},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fromSample(tc.n, tc.live, tc.last)
			if got.Rows != tc.wantRows || got.Exact != tc.wantExact || got.Sampled != tc.n {
				t.Errorf("fromSample(%d, %d, %d) = %+v, want %d rows, exact %v", tc.n, tc.live, tc.last, got, tc.wantRows, tc.wantExact)
			}
		})
	}
}

// Against the real Cassandra: a small table is counted, a larger one
// estimated within a few percent, deleted rows left out, and no read
// returns more than SampleRows rows.
func TestOfAgainstCassandra(t *testing.T) {
	svc := testenv.Cassandra(t)
	cluster, err := svc.CassandraCluster()
	if err != nil {
		t.Fatal(err)
	}
	cluster.Timeout, cluster.ConnectTimeout = 30*time.Second, 10*time.Second
	var rowsRead, reads atomic.Int64
	cluster.QueryObserver = observer(func(q gocql.ObservedQuery) {
		if strings.Contains(q.Statement, "token(") {
			reads.Add(1)
			rowsRead.Add(int64(q.Rows))
		}
	})
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(session.Close)
	keyspace := fmt.Sprintf("fltest_rowestimate_%d", rand.IntN(1_000_000))
	t.Cleanup(func() { _ = session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec() })

	cases := []struct {
		name      string
		rows      int
		wantExact bool
	}{
		{name: "small table", rows: 50, wantExact: true},
		{name: "larger table", rows: 6000},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			schema := viewSchema(keyspace)
			schema.Table = fmt.Sprintf("visits_v%d", i+1)
			if err := cassandra.EnsureSchema(t.Context(), session, schema, cassandra.DefaultReplication()); err != nil {
				t.Fatal(err)
			}
			live := insertRows(t, session, schema, tc.rows)
			reads.Store(0)
			rowsRead.Store(0)
			got, err := Of(t.Context(), session, schema)
			if err != nil {
				t.Fatal(err)
			}
			if got.Exact != tc.wantExact {
				t.Errorf("exact %v, want %v", got.Exact, tc.wantExact)
			}
			if tc.wantExact && got.Rows != int64(live) {
				t.Errorf("counted %d rows, want %d", got.Rows, live)
			}
			if off := math.Abs(float64(got.Rows)/float64(live) - 1); off > 0.12 {
				t.Errorf("estimated %d rows of %d live (%.1f %% off)", got.Rows, live, 100*off)
			}
			if reads.Load() != 1 || rowsRead.Load() > SampleRows {
				t.Errorf("%d reads of %d rows in all, want one of at most %d", reads.Load(), rowsRead.Load(), SampleRows)
			}
			t.Logf("%d rows, %d live: estimated %+v", tc.rows, live, got)
		})
	}
}

// insertRows writes n rows, every tenth marked deleted as the sink marks
// a deleted row, and returns how many are live.
func insertRows(t *testing.T, session *gocql.Session, schema cassandra.ViewSchema, n int) int {
	t.Helper()
	stmt := fmt.Sprintf(`INSERT INTO %s ("user", "day", "n", "fl_deleted") VALUES (?, ?, ?, ?)`, cqlname.Table(schema.Keyspace, schema.Table))
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := atomic.Int64{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				err := session.Query(stmt, fmt.Sprintf("u%d", i), "2026-12-01", int64(i), i%10 == 0).WithContext(context.Background()).Exec()
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("inserting rows: %v", err)
	default:
	}
	return n - (n+9)/10
}

type observer func(gocql.ObservedQuery)

func (o observer) ObserveQuery(_ context.Context, q gocql.ObservedQuery) { o(q) }
