package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/manifest"
)

// A tenant name's generation counts the purges of tenants of that name, so
// that a tenant deployed after a purge gets credentials of its own
// (tenantid.RoleFor): the credentials derive from the name, and without it
// whoever kept a purged tenant's token and login would hold the next
// tenant's. The count lives on the cluster, in Cassandra (Foldline's own
// keyspace, manifest.SystemKeyspace), not with the deployer: every machine
// that deploys (a laptop, a CI runner) must derive the same credentials. A
// name never purged has no row there, generation 0, and keeps the role it
// had before generations existed.
const generationTable = manifest.SystemKeyspace + ".tenant_generations"

// tenantGeneration reads tenant's generation: 0 when the name was never
// purged (no row, or no table yet).
func tenantGeneration(ctx context.Context, cql *gocql.Session, tenant string) (int, error) {
	var n int
	err := cql.Query(`SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`,
		manifest.SystemKeyspace, strings.TrimPrefix(generationTable, manifest.SystemKeyspace+".")).WithContext(ctx).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("looking for %s: %w", generationTable, err)
	}
	if n == 0 {
		return 0, nil
	}
	var generation int
	err = cql.Query(`SELECT generation FROM `+generationTable+` WHERE tenant = ?`, tenant).
		WithContext(ctx).Consistency(gocql.LocalQuorum).Scan(&generation)
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the generation of tenant name %s: %w", tenant, err)
	}
	return generation, nil
}

// nextGeneration records that tenant's generation is one more than
// current, creating Foldline's keyspace and the table when missing, and
// returns the new generation. The keyspace is replicated to up to three
// nodes of the coordinator's datacenter, as many as the cluster has.
func nextGeneration(ctx context.Context, cql *gocql.Session, tenant string, current int) (int, error) {
	var dc string
	if err := cql.Query(`SELECT data_center FROM system.local`).WithContext(ctx).Scan(&dc); err != nil {
		return 0, fmt.Errorf("reading the datacenter: %w", err)
	}
	nodes := 1
	iter := cql.Query(`SELECT data_center FROM system.peers`).WithContext(ctx).Iter()
	for peerDC := ""; iter.Scan(&peerDC); {
		if peerDC == dc {
			nodes++
		}
	}
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("counting the nodes of datacenter %s: %w", dc, err)
	}
	statements := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': %d}`,
			manifest.SystemKeyspace, strings.ReplaceAll(dc, "'", "''"), min(nodes, 3)),
		`CREATE TABLE IF NOT EXISTS ` + generationTable + ` (tenant text PRIMARY KEY, generation int)`,
	}
	for _, q := range statements {
		if err := cql.Query(q).WithContext(ctx).Exec(); err != nil {
			return 0, fmt.Errorf("creating %s: %w", generationTable, err)
		}
	}
	next := current + 1
	err := cql.Query(`UPDATE `+generationTable+` SET generation = ? WHERE tenant = ?`, next, tenant).
		WithContext(ctx).Consistency(gocql.LocalQuorum).Exec()
	if err != nil {
		return 0, fmt.Errorf("recording generation %d of tenant name %s: %w", next, tenant, err)
	}
	return next, nil
}
