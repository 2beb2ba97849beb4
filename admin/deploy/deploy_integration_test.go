package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/build"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/internal/tenantid"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/testenv"
)

// TestDeployShopPipeline deploys the shop manifests into a tenant of its
// own, deploys again (nothing may change), checks status and views, checks
// that stock pulsar-admin accepts a function config file as it is, then
// destroys the pipeline.
func TestDeployShopPipeline(t *testing.T) {
	svc := testenv.All(t)
	tenant := fmt.Sprintf("fltest-deploy-%d", time.Now().UnixNano()%1_000_000)
	log := testenv.LogWriter{T: t}
	opts := deploy.Options{
		Command: target.Command{
			Dir:      testenv.ShopManifestsDir(),
			Target:   target.Flags{Tenant: tenant},
			Services: svc,
			Out:      log, ErrOut: log,
		},
		CacheDir: filepath.Join(os.TempDir(), "foldline-test-bin"), // shared by runs: builds are cached
		Wait:     5 * time.Minute,
	}
	ctx := t.Context()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts, Purge: true, Yes: true}); err != nil {
			t.Logf("purging tenant %s: %v", tenant, err)
		}
	})

	// What the shop declares: its functions and sinks, its views' tables.
	set, err := manifest.Load(opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	stages := len(set.Stages())
	keyspace := strings.ReplaceAll(tenant, "-", "_")
	var wantTables []string
	for _, v := range set.Views {
		wantTables = append(wantTables, keyspace+"."+v.Table())
	}
	slices.Sort(wantTables)

	first, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("first deploy: %v", err)
	}
	if got := countKind(first.Applied, "function"); got != stages {
		t.Errorf("first deploy created %d functions, want the shop's %d functions and sinks", got, stages)
	}

	second, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("second deploy: %v", err)
	}
	if len(second.Applied) != 0 {
		t.Errorf("second deploy changed %d resources, want none: %+v", len(second.Applied), second.Applied)
	}
	if !strings.Contains(second.Plan.Cluster, svc.PulsarURL) || !strings.Contains(second.Plan.Cluster, svc.CassandraHost) {
		t.Errorf("the plan names the cluster %q, want %s and %s in it", second.Plan.Cluster, svc.PulsarURL, svc.CassandraHost)
	}

	// foldline build, then deploy --binaries: the same bytes, so nothing
	// changes; a binary changed after the build is refused.
	dist, signingKey := t.TempDir(), filepath.Join(t.TempDir(), gobuild.SigningKeyName)
	if err := build.Run(ctx, build.Options{Dir: opts.Dir, Out: dist, SigningKey: signingKey, Stdout: log, Progress: log}); err != nil {
		t.Fatalf("foldline build: %v", err)
	}
	prebuilt := opts
	prebuilt.Binaries, prebuilt.BinariesKey = dist, signingKey+".pub"
	third, err := deploy.Deploy(ctx, prebuilt)
	if err != nil {
		t.Fatalf("deploy --binaries: %v", err)
	}
	if len(third.Applied) != 0 {
		t.Errorf("deploy --binaries of what deploy built changed %d resources, want none: %+v", len(third.Applied), third.Applied)
	}
	var index gobuild.Index
	if data, err := os.ReadFile(filepath.Join(dist, gobuild.IndexFile)); err != nil || json.Unmarshal(data, &index) != nil {
		t.Fatalf("reading the index: %v", err)
	}
	tampered := filepath.Join(dist, index.Binaries["github.com/foldline/foldline/functions/shop/validate/cmd"].File)
	if err := os.Remove(tampered); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.MakePlan(ctx, prebuilt); !errors.Is(err, gobuild.ErrPrebuilt) {
		t.Errorf("plan --binaries with a binary changed after the build: %v, want ErrPrebuilt", err)
	}

	t.Run("a role whose password changed gets the derived one again", func(t *testing.T) {
		checkRolePassword(t, opts, tenant)
	})

	t.Run("scripts/stack status counts the tenant's instances", func(t *testing.T) {
		checkStackStatus(t, tenant, stages)
	})

	t.Run("the origin's form follows the readers through an upgrade", func(t *testing.T) {
		checkOriginForms(t, opts, tenant)
	})

	// The deploy that just updated validate returned once its instance ran
	// the new config, not while the one before still answered.
	t.Run("every instance runs the config deploy waited for", func(t *testing.T) {
		checkFingerprints(t, opts, tenant)
	})

	report, err := status.Get(ctx, status.Options{Command: target.Command{Dir: opts.Dir, Target: opts.Target, Services: svc}})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, st := range report.Stages {
		if !st.Deployed || st.Running != st.Instances {
			t.Errorf("stage %s: deployed %v, %d/%d instances running", st.Name, st.Deployed, st.Running, st.Instances)
		}
		for _, sub := range st.Subscriptions {
			if !sub.Exists {
				t.Errorf("stage %s: no subscription %s on %s", st.Name, sub.Subscription, sub.Topic)
			}
		}
	}

	list, err := views.List(ctx, views.Options{Command: target.Command{Dir: opts.Dir, Target: opts.Target, Services: svc}})
	if err != nil {
		t.Fatalf("views: %v", err)
	}
	var tables []string
	for _, v := range list {
		tables = append(tables, v.Keyspace+"."+v.Table)
	}
	slices.Sort(tables)
	if !slices.Equal(tables, wantTables) {
		t.Errorf("views' active tables %v, want %v", tables, wantTables)
	}

	t.Run("pulsar-admin accepts a function config file as it is", func(t *testing.T) {
		createWithPulsarAdmin(t, opts, tenant)
		// deploy leaves a function no manifest declares alone, and says so.
		plan, err := deploy.MakePlan(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(plan.Changes, func(c deploy.Change) bool {
			return c.Action == deploy.Note && c.Name == tenant+"/pipeline/validate-cli" && strings.Contains(strings.Join(c.Details, " "), "no manifest declares it")
		}) || len(plan.Pending()) != 0 {
			t.Errorf("the plan after pulsar-admin created validate-cli: %+v; want only a note of it", plan.Changes)
		}
	})

	removed, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts})
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	t.Logf("destroy removed %d resources", len(removed))
	clients, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	left, err := clients.Functions.GetFunctionsWithContext(ctx, tenant, "pipeline")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(left, func(name string) bool { return name != "validate-cli" }) {
		t.Errorf("functions left after destroy: %v", left)
	}
	after, err := status.Get(ctx, status.Options{Command: target.Command{Dir: opts.Dir, Target: opts.Target, Services: svc}})
	if err != nil {
		t.Fatalf("status after destroy: %v", err)
	}
	for _, st := range after.Stages {
		for _, sub := range st.Subscriptions {
			if sub.Exists {
				t.Errorf("subscription %s on %s left after destroy", sub.Subscription, sub.Topic)
			}
		}
	}

	// The same functions again: the worker keeps a deleted function's
	// binary in its package store and refuses the name until destroy has
	// deleted that too.
	again, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("deploy after destroy: %v", err)
	}
	if got := countKind(again.Applied, "function"); got != stages {
		t.Errorf("deploy after destroy created %d functions, want %d", got, stages)
	}

	// --purge: nothing deploy made is left, the tenant's own login and
	// credentials file included.
	credentials := filepath.Join(filepath.Dir(svc.PulsarSecretKeyFile), "tenants", tenant+".env")
	if _, err := os.Stat(credentials); err != nil {
		t.Fatalf("deploy wrote no credentials file: %v", err)
	}
	purged, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts, Purge: true, Yes: true})
	if err != nil {
		t.Fatalf("destroy --purge: %v", err)
	}
	role := tenantid.RoleFor(tenant, 0)
	if !slices.Contains(purged, "dropped cassandra role "+role) || !slices.Contains(purged, "removed credentials file "+credentials) {
		t.Errorf("destroy --purge says it removed %q; want the role %s and %s among them", purged, role, credentials)
	}
	session, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	var n int
	if err := session.Query(`SELECT COUNT(*) FROM system_auth.roles WHERE role = ?`, role).Scan(&n); err != nil || n != 0 {
		t.Errorf("role %s after destroy --purge: %d rows (%v), want none", role, n, err)
	}
	if _, err := os.Stat(credentials); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("credentials file after destroy --purge: %v, want it gone", err)
	}
	plan, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if kept := slices.DeleteFunc(slices.Clone(plan.Changes), func(c deploy.Change) bool { return c.Action == deploy.Create }); len(kept) != 0 {
		t.Errorf("the plan after destroy --purge has more than creations: %+v", kept)
	}
	if !slices.Contains(purged, "tenant name "+tenant+": the next tenant of this name gets credentials of its own (role "+tenantid.RoleFor(tenant, 1)+")") {
		t.Errorf("destroy --purge says %q; want it to name the next role of the name", purged)
	}
	checkNextGeneration(t, opts, tenant, plan)
}

// checkNextGeneration deploys the tenant again after its purge and checks
// that it runs under credentials of its own: the plan creates the name's
// next role, the credentials file holds the new token and password, the
// purged tenant's token is no admin of the new tenant (and the new one is)
// and the purged tenant's Cassandra login is refused.
func checkNextGeneration(t *testing.T, opts deploy.Options, tenant string, plan *deploy.Plan) {
	ctx := t.Context()
	svc := opts.Services
	key, err := tenantid.ReadKey(svc.PulsarSecretKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	old, next := tenantid.Derive(key, tenant, 0), tenantid.Derive(key, tenant, 1)
	if !slices.ContainsFunc(plan.Changes, func(c deploy.Change) bool {
		return c.Kind == "cassandra role" && c.Name == next.Role && c.Action == deploy.Create
	}) {
		t.Fatalf("the plan after destroy --purge: %+v; want role %s created", plan.Changes, next.Role)
	}
	// As a purge that stopped before dropping it would leave it: the
	// purged tenant's login, which the next deploy drops.
	session, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	if err := session.Query(`CREATE ROLE "` + old.Role + `" WITH PASSWORD = '` + old.CassandraPassword + `' AND LOGIN = true`).Exec(); err != nil {
		t.Fatal(err)
	}
	again, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(again.Changes, func(c deploy.Change) bool {
		return c.Kind == "cassandra role" && c.Name == next.Role && slices.ContainsFunc(c.Details, func(d string) bool {
			return strings.HasPrefix(d, "drops role "+old.Role+",")
		})
	}) {
		roleChanges := slices.DeleteFunc(slices.Clone(again.Changes), func(c deploy.Change) bool { return c.Kind != "cassandra role" })
		t.Errorf("the plan's role changes with the purged tenant's role left: %+v; want role %s's change to drop it", roleChanges, next.Role)
	}
	if _, err := deploy.Deploy(ctx, opts); err != nil {
		t.Fatalf("deploying the tenant again after destroy --purge: %v", err)
	}
	env, err := os.ReadFile(filepath.Join(filepath.Dir(svc.PulsarSecretKeyFile), "tenants", tenant+".env"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "FOLDLINE_PULSAR_TOKEN="+next.PulsarToken+"\n") ||
		!strings.Contains(string(env), "FOLDLINE_CASSANDRA_USER="+next.Role+"\n") ||
		strings.Contains(string(env), old.CassandraPassword) {
		t.Errorf("the credentials file after deploying the purged name again does not hold the new role's credentials only")
	}
	admins := func(token string) error {
		as := svc
		as.PulsarToken, as.PulsarTokenFile = token, ""
		clients, err := pulsarx.Connect(as)
		if err != nil {
			return err
		}
		_, err = clients.Admin.Namespaces().GetNamespaces(tenant)
		return err
	}
	if err := admins(next.PulsarToken); err != nil {
		t.Errorf("the new tenant's token listing its namespaces: %v", err)
	}
	if err := admins(old.PulsarToken); err == nil {
		t.Errorf("the purged tenant's token lists the namespaces of the tenant deployed again under its name")
	}
	asOld := svc
	asOld.CassandraUser, asOld.CassandraPassword, asOld.CassandraPasswordFile = old.Role, old.CassandraPassword, ""
	if session, err := cqlx.Connect(asOld); err == nil {
		session.Close()
		t.Errorf("the purged tenant's Cassandra login %s still logs in", old.Role)
	}
}

// checkOriginForms checks that a new tenant's functions all write the
// origin as one property; then, user-activity made to look as deployed
// by a version that knew only two properties, that validate, which it
// reads, goes back to two and the plan says why; and that the deploy
// after the one that upgraded user-activity switches validate to one again.
func checkOriginForms(t *testing.T, opts deploy.Options, tenant string) {
	ctx := t.Context()
	clients, err := pulsarx.Connect(opts.Services)
	if err != nil {
		t.Fatal(err)
	}
	form := func(name string) any {
		t.Helper()
		conf, err := clients.Functions.GetFunctionWithContext(ctx, tenant, "pipeline", name)
		if err != nil {
			t.Fatal(err)
		}
		return conf.UserConfig[pf.UserConfigOriginProperty]
	}
	names := []string{"dedup", "validate", "user-activity", "purchases", "product-sales", "orders", "sku-refunds", "enrich-purchases", "user_activity_v1-sink", "product_sales_v1-sink", "sku_refunds_v1-sink"}
	for _, name := range names {
		if got := form(name); got != "single" {
			t.Errorf("%s deployed with %s %v, want single", name, pf.UserConfigOriginProperty, got)
		}
		conf, err := clients.Functions.GetFunctionWithContext(ctx, tenant, "pipeline", name)
		if err != nil {
			t.Fatal(err)
		}
		// The functions' outputs are compressed; a sink writes none.
		want := any(deploy.DeployedCompression)
		if strings.HasSuffix(name, "-sink") {
			want = nil
		}
		if got := conf.UserConfig[pf.UserConfigCompression]; got != want {
			t.Errorf("%s deployed with %s %v, want %v", name, pf.UserConfigCompression, got, want)
		}
	}
	old, err := clients.Functions.GetFunctionWithContext(ctx, tenant, "pipeline", "user-activity")
	if err != nil {
		t.Fatal(err)
	}
	// As an older deploy left it: no key, another binary and fingerprint.
	delete(old.UserConfig, pf.UserConfigOriginProperty)
	old.UserConfig[deploy.UserConfigFingerprint] = "older"
	if err := clients.Functions.UpdateFunctionWithContext(ctx, &old, "", utils.NewUpdateOptions()); err != nil {
		t.Fatalf("updating user-activity's config: %v", err)
	}
	plan, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	plan.Write(testenv.LogWriter{T: t}, false)
	var note string
	for _, c := range plan.Changes {
		if c.Action == deploy.Note && c.Name == tenant+"/pipeline/validate" {
			note = strings.Join(c.Details, " ")
		}
	}
	if !strings.Contains(note, "not yet: "+tenant+"/pipeline/user-activity.") {
		t.Errorf("no note that user-activity holds validate back: %+v", plan.Changes)
	}
	if _, err := deploy.Deploy(ctx, opts); err != nil {
		t.Fatalf("deploy upgrading user-activity: %v", err)
	}
	if got, ua := form("validate"), form("user-activity"); got != "pair" || ua != "single" {
		t.Errorf("after the deploy that upgraded user-activity: validate %v, user-activity %v; want pair and single", got, ua)
	}
	next, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("deploy after the upgrade: %v", err)
	}
	if got := form("validate"); got != "single" || countKind(next.Applied, "function") != 1 {
		t.Errorf("the next deploy: validate %v, %d functions changed; want single, 1", got, countKind(next.Applied, "function"))
	}
}

// checkFingerprints checks that every instance of the tenant's functions
// reports the fingerprint of its function's config (pf.FingerprintMetric).
func checkFingerprints(t *testing.T, opts deploy.Options, tenant string) {
	ctx := t.Context()
	clients, err := pulsarx.Connect(opts.Services)
	if err != nil {
		t.Fatal(err)
	}
	names, err := clients.Functions.GetFunctionsWithContext(ctx, tenant, "pipeline")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		conf, err := clients.Functions.GetFunctionWithContext(ctx, tenant, "pipeline", name)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := pf.FingerprintMetric(fmt.Sprint(conf.UserConfig[deploy.UserConfigFingerprint]))
		if !ok {
			t.Errorf("%s: config fingerprint %v", name, conf.UserConfig[deploy.UserConfigFingerprint])
			continue
		}
		stats, err := clients.Functions.GetFunctionStatsWithContext(ctx, tenant, "pipeline", name)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats.Instances) != conf.Parallelism {
			t.Errorf("%s: stats of %d instances, want %d", name, len(stats.Instances), conf.Parallelism)
		}
		for _, inst := range stats.Instances {
			if got, ok := inst.Metrics.UserMetrics[deploy.UserConfigFingerprint]; !ok || got != want {
				t.Errorf("%s instance %d reports fingerprint %v (%v), want %v", name, inst.InstanceID, got, ok, want)
			}
		}
	}
}

// createWithPulsarAdmin runs stock pulsar-admin functions create with a
// copy of a function config file moved to the test tenant, and waits until
// the function runs.
func createWithPulsarAdmin(t *testing.T, opts deploy.Options, tenant string) {
	src, err := os.ReadFile(filepath.Join(opts.Dir, "functions", "validate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// It reads the ledger itself, as validate did before the dedup stage:
	// a reader of dedup's output that deploy knows nothing of would hold
	// dedup's origin back in two properties (see origin.go).
	conf := strings.NewReplacer(
		"persistent://shop/pipeline/distinct", "persistent://"+tenant+"/ledger/events",
		"persistent://shop/", "persistent://"+tenant+"/",
		"tenant: shop", "tenant: "+tenant,
		"name: validate", "name: validate-cli",
		"subName: validate", "subName: validate-cli",
	).Replace(string(src))
	file := filepath.Join(t.TempDir(), "validate.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	builder := &gobuild.Builder{Dir: opts.Dir, CacheDir: opts.CacheDir}
	bin, err := builder.Build(t.Context(), "github.com/foldline/foldline/functions/shop/validate/cmd")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"functions", "create", "--function-config-file", file, "--go", bin.Path}
	if key := opts.Services.PulsarSecretKeyFile; key != "" {
		// Run as the tenant, as deploy does: the runtime refuses the worker's token.
		k, err := tenantid.ReadKey(key)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--secrets", `{"token":"`+tenantid.Derive(k, tenant, 0).PulsarToken+`"}`)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "scripts", "pulsar-admin"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pulsar-admin functions create: %v\n%s", err, out)
	}
	clients, err := pulsarx.Connect(opts.Services)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := clients.Functions.GetFunctionStatusWithContext(t.Context(), tenant, "pipeline", "validate-cli")
		if err == nil && st.NumRunning == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("validate-cli not running 3 minutes after pulsar-admin created it: %+v %v", st, err)
		}
		time.Sleep(time.Second)
	}
}

func countKind(changes []deploy.Change, kind string) int {
	n := 0
	for _, c := range changes {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

// checkStackStatus checks that scripts/stack status lists want function
// instances running for tenant, when the stack it looks at is the one the
// tests run against (its Pulsar started by scripts/stack).
func checkStackStatus(t *testing.T, tenant string, want int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(testenv.RepoRoot(), "scripts", "stack"), "status", "pulsar")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ready") {
		t.Skipf("the stack's Pulsar is not one scripts/stack started (%v): %s", err, out)
	}
	if line := fmt.Sprintf("tenant %s: %d", tenant, want); !strings.Contains(string(out), line) {
		t.Errorf("scripts/stack status says\n%s\nwant a functions line with %q", out, line)
	}
}

// checkRolePassword changes the tenant's Cassandra password by hand, as a
// rotated signing key would leave it, and checks that the plan says so,
// that deploy sets the derived one again, and that the tenant's
// credentials then log in to its keyspace.
func checkRolePassword(t *testing.T, opts deploy.Options, tenant string) {
	ctx := t.Context()
	svc := opts.Services
	session, err := cqlx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	role := tenantid.RoleFor(tenant, 0)
	if err := session.Query(`ALTER ROLE "` + role + `" WITH PASSWORD = 'changed-by-hand'`).Exec(); err != nil {
		t.Fatal(err)
	}
	plan, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	pending := plan.Pending()
	if len(pending) != 1 || pending[0].Kind != "cassandra role" || pending[0].Action != deploy.Update ||
		!strings.Contains(strings.Join(pending[0].Details, " "), "password: not the one derived") {
		t.Fatalf("the plan after the password changed: %+v; want only the role, updated for its password", pending)
	}
	if _, err := deploy.Deploy(ctx, opts); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	after, err := deploy.MakePlan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Pending()) != 0 {
		t.Errorf("the plan after deploy set the password again: %+v, want nothing to do", after.Pending())
	}
	// The credentials deploy wrote for the tenant log in to its keyspace
	// (Cassandra may take a moment to drop the old password from its cache).
	env, err := os.ReadFile(filepath.Join(filepath.Dir(svc.PulsarSecretKeyFile), "tenants", tenant+".env"))
	if err != nil {
		t.Fatal(err)
	}
	asTenant := svc
	asTenant.CassandraUser, asTenant.CassandraPasswordFile = role, ""
	for line := range strings.Lines(string(env)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "FOLDLINE_CASSANDRA_PASSWORD="); ok {
			asTenant.CassandraPassword = v
		}
	}
	var loginErr error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		var tenantSession *gocql.Session
		if tenantSession, loginErr = cqlx.Connect(asTenant); loginErr == nil {
			var n int
			loginErr = tenantSession.Query(`SELECT COUNT(*) FROM "` + strings.ReplaceAll(tenant, "-", "_") + `".foldline_views`).Scan(&n)
			tenantSession.Close()
			if loginErr == nil {
				return
			}
		}
	}
	t.Errorf("logging in as %s with the derived password after deploy: %v", role, loginErr)
}
