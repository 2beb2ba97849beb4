// Package cqlxtest gives tests a keyspace of their own in the stack's real
// Cassandra, dropped when the test ends.
package cqlxtest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/internal/testenv"
)

// Keyspace connects to the stack's Cassandra (skipping or failing the test
// as testenv.Cassandra does when it does not run) and creates a keyspace
// named prefix_<random>, replication factor 1. The keyspace is dropped and
// the session closed when the test ends.
func Keyspace(t testing.TB, prefix string) (*gocql.Session, string) {
	t.Helper()
	session, err := cqlx.Connect(testenv.Cassandra(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(session.Close)
	ks := fmt.Sprintf("%s_%d", prefix, rand.Uint64()%1_000_000_000)
	if err := session.Query(fmt.Sprintf(`CREATE KEYSPACE %s WITH replication = {'class':'SimpleStrategy','replication_factor':1}`, ks)).Exec(); err != nil {
		t.Fatalf("creating keyspace %s: %v", ks, err)
	}
	t.Cleanup(func() { _ = session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec() })
	return session, ks
}
