package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/owner"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/internal/testenv"
)

// TestDeployAndDestroyRefuseAnotherTenantsKeyspace: a keyspace recorded as
// another tenant's is neither used by deploy nor dropped by destroy
// --purge, and nothing is created or removed on the way.
func TestDeployAndDestroyRefuseAnotherTenantsKeyspace(t *testing.T) {
	svc := testenv.All(t)
	ctx := t.Context()
	tenant := fmt.Sprintf("fltest-owner-%d", time.Now().UnixNano()%1_000_000)
	ks := manifest.KeyspaceFor(tenant)
	cql, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cql.Close)
	pulsar, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cql.Query(`DROP KEYSPACE IF EXISTS ` + cqlname.Quote(ks)).WithContext(ctx).Exec()
		_ = pulsar.Admin.Tenants().DeleteWithContext(ctx, tenant)
	})
	exec := func(stmt string) {
		t.Helper()
		if err := cql.Query(stmt).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	exec(`CREATE KEYSPACE ` + cqlname.Quote(ks) + ` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}`)
	if err := owner.Claim(ctx, cql, ks, "someone-else"); err != nil {
		t.Fatalf("claiming %s for someone-else: %v", ks, err)
	}

	t.Run("claims", func(t *testing.T) {
		if err := owner.Claim(ctx, cql, ks, "someone-else"); err != nil {
			t.Errorf("the owner's second claim: %v", err)
		}
		var foreign *owner.ForeignError
		if err := owner.Claim(ctx, cql, ks, tenant); !errors.As(err, &foreign) || foreign.Owner != "someone-else" {
			t.Errorf("another tenant's claim = %v, want a ForeignError naming someone-else", err)
		}
	})

	opts := deploy.Options{
		Command: target.Command{
			Dir:      testenv.ShopManifestsDir(),
			Target:   target.Flags{Tenant: tenant},
			Services: svc,
			Out:      testenv.LogWriter{T: t}, ErrOut: testenv.LogWriter{T: t},
		},
		CacheDir: filepath.Join(t.TempDir(), "bin"),
	}
	t.Run("deploy", func(t *testing.T) {
		if _, err := deploy.Deploy(ctx, opts); !errors.Is(err, owner.ErrForeign) {
			t.Fatalf("deploy = %v, want owner.ErrForeign", err)
		}
		if _, err := pulsar.Admin.Tenants().GetWithContext(ctx, tenant); !pulsarx.IsNotFound(err) {
			t.Errorf("deploy created tenant %s before refusing (get: %v)", tenant, err)
		}
	})

	t.Run("destroy --purge", func(t *testing.T) {
		if err := pulsar.Admin.Tenants().CreateWithContext(ctx, utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
			t.Fatalf("creating tenant %s: %v", tenant, err)
		}
		_, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts, Tables: true, Purge: true, Yes: true})
		if !errors.Is(err, owner.ErrForeign) {
			t.Fatalf("destroy --purge = %v, want owner.ErrForeign", err)
		}
		if recorded, err := owner.Check(ctx, cql, ks, "someone-else"); err != nil || !recorded {
			t.Errorf("after the refused destroy, someone-else's keyspace: recorded %v, %v", recorded, err)
		}
		if _, err := pulsar.Admin.Tenants().GetWithContext(ctx, tenant); err != nil {
			t.Errorf("the refused destroy removed tenant %s: %v", tenant, err)
		}
	})

	t.Run("a keyspace Foldline did not make", func(t *testing.T) {
		other := ks + "_app"
		t.Cleanup(func() { _ = cql.Query(`DROP KEYSPACE IF EXISTS ` + cqlname.Quote(other)).Exec() })
		exec(`CREATE KEYSPACE ` + cqlname.Quote(other) + ` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}`)
		exec(`CREATE TABLE ` + cqlname.Table(other, "data") + ` (id text PRIMARY KEY)`)
		if _, err := owner.Check(ctx, cql, other, tenant); !errors.Is(err, owner.ErrForeign) {
			t.Errorf("Check of an application's keyspace = %v, want owner.ErrForeign", err)
		}
	})
}
