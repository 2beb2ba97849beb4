package registry

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// TestSinkReadsTheStateOfItsTable checks the contract between the registry
// and the sink, which reads it (cassandra.RegistryWatch) to write a table
// that a backfill is building in large batches and a live one eagerly.
func TestSinkReadsTheStateOfItsTable(t *testing.T) {
	if StateBuilding != cassandra.StateBuilding {
		t.Fatalf("registry state %q, sink expects %q", StateBuilding, cassandra.StateBuilding)
	}
	svc := testenv.Cassandra(t)
	session, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	ks := fmt.Sprintf("regtest_%d", rand.Uint64()%1_000_000_000)
	if err := session.Query(fmt.Sprintf(`CREATE KEYSPACE %s WITH replication = {'class':'SimpleStrategy','replication_factor':1}`, ks)).Exec(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec() })
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
