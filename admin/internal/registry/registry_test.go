package registry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/cqlx/cqlxtest"
	"github.com/foldline/foldline/sinks/cassandra"
)

// TestSinkReadsTheStateOfItsTable checks the contract between the registry
// and the sink, which reads it (cassandra.RegistryWatch) to write a table
// that a backfill is building in large batches and a live one eagerly.
func TestSinkReadsTheStateOfItsTable(t *testing.T) {
	if StateBuilding != cassandra.StateBuilding {
		t.Fatalf("registry state %q, sink expects %q", StateBuilding, cassandra.StateBuilding)
	}
	session, ks := cqlxtest.Keyspace(t, "regtest")
	watch := func(table string) cassandra.RegistryWatch {
		return cassandra.RegistryWatch{Session: session, Keyspace: ks, Registry: Table, View: "user_activity", Table: table}
	}
	building := func(table string) bool {
		t.Helper()
		b, err := watch(table).Building(t.Context())
		if err != nil {
			t.Fatalf("reading the state of %s: %v", table, err)
		}
		return b
	}
	if _, err := watch("user_activity_v1").Building(t.Context()); err == nil {
		t.Error("reading a registry that does not exist: no error")
	}
	if err := Ensure(t.Context(), session, ks); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(t.Context(), session, ks, "user_activity", "user_activity_v1", "{}"); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuilding(t.Context(), session, ks, "user_activity", "user_activity_v2", "{}"); err != nil {
		t.Fatal(err)
	}
	if building("user_activity_v1") || !building("user_activity_v2") || building("user_activity_v9") {
		t.Errorf("building: v1 %v (active), v2 %v (building), v9 %v (unknown); want false, true, false",
			building("user_activity_v1"), building("user_activity_v2"), building("user_activity_v9"))
	}
	if _, err := Activate(t.Context(), session, ks, "user_activity", "user_activity_v2"); err != nil {
		t.Fatal(err)
	}
	if building("user_activity_v2") {
		t.Error("an activated table still reads as building")
	}
}

// TestDropRefusesTheActiveTable checks, against the real Cassandra, that
// Drop reads the registry when it drops: a table that became active after
// the caller last looked is refused and kept, any other version goes.
func TestDropRefusesTheActiveTable(t *testing.T) {
	session, ks := cqlxtest.Keyspace(t, "regtest")
	ctx := t.Context()
	if err := Ensure(ctx, session, ks); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"v_v1", "v_v2"} {
		if err := session.Query(fmt.Sprintf(`CREATE TABLE %s.%s (k int PRIMARY KEY)`, ks, table)).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Register(ctx, session, ks, "v", "v_v1", "{}"); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuilding(ctx, session, ks, "v", "v_v2", "{}"); err != nil {
		t.Fatal(err)
	}
	// What a caller saw (v_v2 building) is stale by the time it drops.
	if _, err := Activate(ctx, session, ks, "v", "v_v2"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		table      string
		wantErr    error
		wantExists bool
	}{
		{name: "the active table", table: "v_v2", wantErr: ErrActiveTable, wantExists: true},
		{name: "a retired table", table: "v_v1", wantErr: nil, wantExists: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Drop(ctx, session, ks, "v", c.table); !errors.Is(err, c.wantErr) {
				t.Fatalf("Drop(%s) = %v, want %v", c.table, err, c.wantErr)
			}
			var n int
			if err := session.Query(`SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, ks, c.table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			_, _, err := FindTable(ctx, session, ks, c.table)
			if registered := err == nil; (n == 1) != c.wantExists || registered != c.wantExists {
				t.Errorf("after Drop(%s): table exists %v, registered %v; want both %v", c.table, n == 1, registered, c.wantExists)
			}
		})
	}
}

// TestSwitchAndForgetAreSerialized plays the race between a drop and a
// switch that both read the registry before it changed: the one that comes
// second is refused by its lightweight transaction, never leaving the view
// pointing at a forgotten table or forgetting the active one.
func TestSwitchAndForgetAreSerialized(t *testing.T) {
	session, ks := cqlxtest.Keyspace(t, "regtest")
	ctx := t.Context()
	if err := Ensure(ctx, session, ks); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(ctx, session, ks, "v", "v_v1", "{}"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"v_v2", "v_v3"} {
		if err := RegisterBuilding(ctx, session, ks, "v", table, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	// A drop that read v_v2 as building forgets it only after the switch
	// made it active: refused.
	if _, err := Activate(ctx, session, ks, "v", "v_v2"); err != nil {
		t.Fatal(err)
	}
	if err := forget(ctx, session, ks, "v", "v_v2"); !errors.Is(err, ErrActiveTable) {
		t.Fatalf("forgetting the table activated meanwhile: %v, want ErrActiveTable", err)
	}
	// A switch that read v_v3 as building makes it active only after a
	// drop forgot it: refused, v_v2 stays active.
	stale, err := Get(ctx, session, ks, "v")
	if err != nil {
		t.Fatal(err)
	}
	if err := forget(ctx, session, ks, "v", "v_v3"); err != nil {
		t.Fatal(err)
	}
	if _, err := switchTo(ctx, session, ks, stale, "v_v3"); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("switching to a table forgotten meanwhile: %v, want ErrUnknownTable", err)
	}
	entry, err := Get(ctx, session, ks, "v")
	if err != nil {
		t.Fatal(err)
	}
	if entry.ActiveTable != "v_v2" {
		t.Errorf("active table %q, want v_v2", entry.ActiveTable)
	}
}

// requestError is a Cassandra error response of a code.
type requestError int

func (e requestError) Code() int       { return int(e) }
func (e requestError) Message() string { return fmt.Sprintf("code %#x", int(e)) }
func (e requestError) Error() string   { return e.Message() }

// TestTransient: what MarkSnapshot retries (a timeout, an unavailable
// replica, a compare-and-set of unknown outcome, no connection), and what
// it does not (a refused query, any other error).
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", requestError(gocql.ErrCodeWriteTimeout)), true},
		{requestError(gocql.ErrCodeCASWriteUnknown), true},
		{requestError(gocql.ErrCodeUnavailable), true},
		{fmt.Errorf("x: %w", gocql.ErrTimeoutNoResponse), true},
		{gocql.ErrNoConnections, true},
		{requestError(gocql.ErrCodeInvalid), false},
		{requestError(gocql.ErrCodeUnauthorized), false},
		{errors.New("table not registered"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
