package target

import (
	"errors"
	"testing"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/internal/testenv"
)

func TestLoadRefusesAKeyspaceNotTheTenants(t *testing.T) {
	dir := testenv.ShopManifestsDir()
	cases := []struct {
		name         string
		flags        Flags
		wantKeyspace string
		wantUsage    bool
	}{
		{name: "manifests as they are", wantKeyspace: "shop"},
		{name: "another tenant", flags: Flags{Tenant: "shop-test"}, wantKeyspace: "shop_test"},
		{name: "the tenant's own keyspace named", flags: Flags{Tenant: "shop-test", Keyspace: "shop_test"}, wantKeyspace: "shop_test"},
		{name: "another tenant's keyspace", flags: Flags{Tenant: "evil", Keyspace: "shop"}, wantUsage: true},
		{name: "a hostile keyspace", flags: Flags{Keyspace: `shop"; DROP KEYSPACE shop; --`}, wantUsage: true},
		{name: "a tenant whose keyspace would collide", flags: Flags{Tenant: "shop_test"}, wantUsage: true},
		{name: "Cassandra's own keyspace", flags: Flags{Tenant: "system-auth"}, wantUsage: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := tc.flags.Load(dir)
			if tc.wantUsage {
				if !errors.Is(err, exitcode.ErrUsage) {
					t.Fatalf("Load = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Tenant.Keyspace != tc.wantKeyspace {
				t.Errorf("keyspace %s, want %s", set.Tenant.Keyspace, tc.wantKeyspace)
			}
		})
	}
	if err := (&Flags{Keyspace: `a"b`}).CheckKeyspace(); !errors.Is(err, exitcode.ErrUsage) {
		t.Errorf("CheckKeyspace(a\"b) = %v, want a usage error", err)
	}
}
