package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/testenv"
)

// TestDeployAppliesOffloadPolicies deploys the shop tenant manifest alone
// with every offload setting (size and time thresholds, deletion lag) on
// its ledger namespace under a tenant of its own, checks that the namespace carries them, that a
// second deploy changes nothing, and that a changed threshold is one update.
func TestDeployAppliesOffloadPolicies(t *testing.T) {
	svc := testenv.All(t)
	tenant := fmt.Sprintf("fltest-offload-%d", time.Now().UnixNano()%1_000_000)
	dir := t.TempDir()
	shop, err := os.ReadFile(filepath.Join(testenv.ShopManifestsDir(), "tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(seconds int) {
		t.Helper()
		withTime := strings.Replace(string(shop), "      thresholdBytes: 1073741824\n",
			fmt.Sprintf("      thresholdBytes: 1073741824\n      thresholdSeconds: %d\n      deletionLagMs: 60000\n", seconds), 1)
		if withTime == string(shop) {
			t.Fatal("the shop manifests' tenant.yaml no longer has the offload block this test extends")
		}
		if err := os.WriteFile(filepath.Join(dir, "tenant.yaml"), []byte(withTime), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := testenv.LogWriter{T: t}
	opts := deploy.Options{Command: target.Command{Dir: dir, Target: target.Flags{Tenant: tenant}, Services: svc, Out: log, ErrOut: log}, Wait: time.Minute}
	ctx := t.Context()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := deploy.Destroy(ctx, deploy.DestroyOptions{Options: opts, Purge: true, Yes: true}); err != nil {
			t.Logf("purging tenant %s: %v", tenant, err)
		}
	})

	write(3600)
	if _, err := deploy.Deploy(ctx, opts); err != nil {
		t.Fatalf("first deploy: %v", err)
	}
	clients, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName(tenant + "/ledger")
	admin := clients.Admin.Namespaces()
	bytes, err := admin.GetOffloadThresholdWithContext(ctx, *ns)
	if err != nil {
		t.Fatal(err)
	}
	seconds, err := admin.GetOffloadThresholdInSecondsWithContext(ctx, *ns)
	if err != nil {
		t.Fatal(err)
	}
	lag, err := admin.GetOffloadDeleteLagWithContext(ctx, *ns)
	if err != nil {
		t.Fatal(err)
	}
	if bytes != 1073741824 || seconds != 3600 || lag != 60000 {
		t.Errorf("namespace %s: thresholds %d bytes, %d s, deletion lag %d ms; want 1073741824, 3600, 60000", ns, bytes, seconds, lag)
	}

	second, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("second deploy: %v", err)
	}
	if len(second.Applied) != 0 {
		t.Errorf("second deploy changed %+v, want nothing", second.Applied)
	}

	write(7200)
	third, err := deploy.Deploy(ctx, opts)
	if err != nil {
		t.Fatalf("deploy with a new time threshold: %v", err)
	}
	if len(third.Applied) != 1 || third.Applied[0].Name != ns.String() {
		t.Errorf("deploy with a new time threshold changed %+v, want namespace %s alone", third.Applied, ns)
	}
	if seconds, err := admin.GetOffloadThresholdInSecondsWithContext(ctx, *ns); err != nil || seconds != 7200 {
		t.Errorf("time threshold after the update = %d, %v; want 7200", seconds, err)
	}
}
