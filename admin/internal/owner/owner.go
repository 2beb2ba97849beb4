// Package owner records which tenant owns a keyspace, in the keyspace
// itself (table foldline_owner), and refuses a tenant the keyspace of
// another. A tenant's keyspace is derived from its name one-to-one
// (manifest.KeyspaceFor), so two tenants never name one keyspace through
// manifests; the record guards what the name cannot: a keyspace made by
// hand or by another application, or one left from before names were
// restricted. Deploy claims the keyspace before it creates anything in it;
// destroy checks it before it drops anything.
package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/internal/cqlname"
)

// Table is the owner record's table in every tenant keyspace.
const Table = "foldline_owner"

// ErrForeign is what a *ForeignError is (errors.Is).
var ErrForeign = errors.New("the keyspace is not this tenant's")

// ForeignError is a keyspace another tenant owns, or one that Foldline did
// not make (Owner empty).
type ForeignError struct {
	Keyspace, Owner, Tenant string
}

func (e *ForeignError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("keyspace %s exists, records no owner and is not Foldline's (no %s table): tenant %s will not use or drop it",
			e.Keyspace, registry.Table, e.Tenant)
	}
	return fmt.Sprintf("keyspace %s belongs to tenant %s: tenant %s will not use or drop it", e.Keyspace, e.Owner, e.Tenant)
}

// Is makes errors.Is(err, ErrForeign) hold.
func (e *ForeignError) Is(target error) bool { return target == ErrForeign }

// Check returns a *ForeignError when keyspace belongs to another tenant
// than tenant, or exists with tables but without an owner record nor a
// view registry (not Foldline's). recorded reports whether tenant's own
// record is there; a keyspace that does not exist is fine and unrecorded.
func Check(ctx context.Context, s *gocql.Session, keyspace, tenant string) (recorded bool, err error) {
	tables := map[string]bool{}
	iter := s.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, keyspace).WithContext(ctx).Iter()
	var name string
	for iter.Scan(&name) {
		tables[name] = true
	}
	if err := iter.Close(); err != nil {
		return false, fmt.Errorf("listing tables of keyspace %s: %w", keyspace, err)
	}
	if !tables[Table] {
		if len(tables) > 0 && !tables[registry.Table] {
			return false, &ForeignError{Keyspace: keyspace, Tenant: tenant}
		}
		return false, nil // empty, or Foldline's from before owner records
	}
	var owner string
	err = s.Query(fmt.Sprintf(`SELECT tenant FROM %s WHERE id = 'owner'`, cqlname.Table(keyspace, Table))).WithContext(ctx).Scan(&owner)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the owner of keyspace %s: %w", keyspace, err)
	case owner != tenant:
		return false, &ForeignError{Keyspace: keyspace, Owner: owner, Tenant: tenant}
	}
	return true, nil
}

// Claim records tenant as keyspace's owner unless another tenant is
// recorded (a *ForeignError). The write is a lightweight transaction, so
// of two tenants claiming at once exactly one wins.
func Claim(ctx context.Context, s *gocql.Session, keyspace, tenant string) error {
	create := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (id text PRIMARY KEY, tenant text)`, cqlname.Table(keyspace, Table))
	if err := s.Query(create).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating the owner record of keyspace %s: %w", keyspace, err)
	}
	existing := map[string]any{}
	applied, err := s.Query(fmt.Sprintf(`INSERT INTO %s (id, tenant) VALUES ('owner', ?) IF NOT EXISTS`, cqlname.Table(keyspace, Table)), tenant).
		WithContext(ctx).MapScanCAS(existing)
	if err != nil {
		return fmt.Errorf("recording tenant %s as the owner of keyspace %s: %w", tenant, keyspace, err)
	}
	if owner, _ := existing["tenant"].(string); !applied && owner != tenant {
		return &ForeignError{Keyspace: keyspace, Owner: owner, Tenant: tenant}
	}
	return nil
}
