// Package cqlx opens the Cassandra session of the admin commands, with an
// error that names the script that starts the stack when Cassandra does not
// answer.
package cqlx

import (
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/services"
)

// Connect checks that Cassandra answers and opens a session on it.
func Connect(s services.Services) (*gocql.Session, error) {
	if err := s.CheckCassandra(); err != nil {
		return nil, err
	}
	cluster, err := s.CassandraCluster()
	if err != nil {
		return nil, err
	}
	cluster.Consistency = gocql.LocalQuorum
	cluster.Timeout = 30 * time.Second // schema changes on a busy single node take a while
	cluster.ConnectTimeout = 10 * time.Second
	cluster.ProtoVersion = 4
	session, err := cqlsession.Create(cluster)
	if err != nil {
		return nil, fmt.Errorf("connecting to Cassandra at %s as %q: %w (the hosts: %s; the user: %s)",
			s.CassandraHost, s.CassandraUser, err, s.Origin("cassandra-hosts").Change(), s.Origin("cassandra-user").Change())
	}
	return session, nil
}
