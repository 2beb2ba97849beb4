package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// dataTenant creates what deploy would of the shop manifests under a
// tenant of the test's own, except the functions: the tenant, its
// namespaces, the ledger topic with three entries, the keyspace with the
// views' tables and their registry. It returns the tenant and keyspace.
func dataTenant(t *testing.T, clients *pulsarx.Clients, session *gocql.Session) (tenant, keyspace string) {
	t.Helper()
	ctx := t.Context()
	tenant = fmt.Sprintf("fltest-destroy-%d", rand.Uint64()%1_000_000)
	flags := target.Flags{Tenant: tenant}
	set, err := flags.Load(testenv.ShopManifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.Admin.Tenants().CreateWithContext(ctx, utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatalf("creating tenant %s: %v", tenant, err)
	}
	for _, ns := range set.Tenant.Namespaces {
		if err := clients.Admin.Namespaces().CreateNamespaceWithContext(ctx, tenant+"/"+ns.Name); err != nil {
			t.Fatalf("creating namespace %s/%s: %v", tenant, ns.Name, err)
		}
	}
	testenv.Publish(t, testenv.Load(t), set.Tenant.Ledger[0].Name, 3)
	keyspace = set.Tenant.Keyspace
	for _, v := range set.Views {
		schema := v.Schema()
		if err := cassandra.EnsureSchema(ctx, session, schema, cassandra.Replication(set.Tenant.Replication)); err != nil {
			t.Fatal(err)
		}
		if err := registry.Ensure(ctx, session, keyspace); err != nil {
			t.Fatal(err)
		}
		definition, err := json.Marshal(schema)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := registry.Register(ctx, session, keyspace, v.Name, schema.Table, string(definition)); err != nil {
			t.Fatal(err)
		}
	}
	return tenant, keyspace
}

// TestDestroyAsksBeforeRemovingData checks that destroy --tables and
// --purge print what they will remove and, without --yes and with no
// terminal to ask on, remove nothing and exit 2; with --yes --purge the
// tenant and keyspace go.
func TestDestroyAsksBeforeRemovingData(t *testing.T) {
	svc := testenv.All(t)
	clients, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	session, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(session.Close)
	tenant, keyspace := dataTenant(t, clients, session)
	dir := testenv.ShopManifestsDir()
	t.Cleanup(func() {
		opts := deploy.DestroyOptions{Options: deploy.Options{Command: target.Command{Dir: dir, Target: target.Flags{Tenant: tenant}, Services: svc}}, Purge: true, Yes: true}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := deploy.Destroy(ctx, opts); err != nil && !errors.Is(err, exitcode.ErrNotFound) {
			t.Logf("purging tenant %s: %v", tenant, err)
		}
	})
	exists := func() (tenantExists, tableExists bool) {
		t.Helper()
		tenantErr := clients.RequireTenant(t.Context(), tenant)
		if tenantErr != nil && !errors.Is(tenantErr, exitcode.ErrNotFound) {
			t.Fatal(tenantErr)
		}
		var n int
		if err := session.Query(`SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, keyspace, "user_activity_v1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return tenantErr == nil, n == 1
	}
	cases := []struct {
		name     string
		args     []string
		wantCode int
		// wantPreview are lines destroy prints before it acts.
		wantPreview []string
		wantTenant  bool
		wantTable   bool
	}{
		{name: "purge without --yes", args: []string{"--purge"}, wantCode: exitcode.Usage,
			wantPreview: []string{"tenant " + tenant, "namespace " + tenant + "/ledger", "topic persistent://" + tenant + "/ledger/events (3 entries)",
				"keyspace " + keyspace + " with its", "table " + keyspace + ".user_activity_v1 (view user_activity)"},
			wantTenant: true, wantTable: true},
		{name: "tables without --yes", args: []string{"--tables"}, wantCode: exitcode.Usage,
			wantPreview: []string{"table " + keyspace + ".product_sales_v1 (view product_sales)"},
			wantTenant:  true, wantTable: true},
		{name: "purge with --yes", args: []string{"--purge", "--yes"}, wantCode: exitcode.OK,
			wantPreview: []string{"tenant " + tenant, "dropped keyspace " + keyspace},
			wantTenant:  false, wantTable: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := deploy.NewDestroyCommand()
			var stderr bytes.Buffer
			cmd.SetArgs(append([]string{dir, "--tenant", tenant}, c.args...))
			cmd.SetIn(strings.NewReader("y\n")) // not a terminal: never read
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&stderr)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true // as the root command does
			err := cmd.ExecuteContext(t.Context())
			t.Logf("destroy %v: %v\n%s", c.args, err, stderr.String())
			if code := exitcode.For(err); code != c.wantCode {
				t.Errorf("exit code %d, want %d", code, c.wantCode)
			}
			if c.wantCode != exitcode.OK && (!errors.Is(err, deploy.ErrNotConfirmed) || !strings.Contains(err.Error(), "pass --yes")) {
				t.Errorf("error %v, want ErrNotConfirmed saying to pass --yes", err)
			}
			for _, want := range c.wantPreview {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q", want)
				}
			}
			if tenantExists, tableExists := exists(); tenantExists != c.wantTenant || tableExists != c.wantTable {
				t.Errorf("after destroy %v: tenant exists %v, table exists %v; want %v, %v", c.args, tenantExists, tableExists, c.wantTenant, c.wantTable)
			}
		})
	}
}
