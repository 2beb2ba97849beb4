package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/internal/testenv"
)

// TestSinkWithTwoInstancesKeepsRowOrder runs user_activity's sink as two
// instances on a key_shared subscription, with user-activity batching its
// operations by key and the sink's row cache off (the layout foldline lint
// accepts for a multi-instance sink): both instances get work, and the
// views still equal the fold, which they would not if a row's operations
// were applied out of order (the sink skips an operation whose origin is not
// past the row's last applied one).
func TestSinkWithTwoInstancesKeepsRowOrder(t *testing.T) {
	dir := testenv.ShopManifests(t)
	editFile(t, filepath.Join(dir, "views/user_activity.yaml"), "  parallelism: 1\n  userConfig:",
		"  parallelism: 2\n  userConfig:\n    subscriptionType: key_shared\n    row_cache: 0")
	editFile(t, filepath.Join(dir, "functions/user-activity.yaml"), "parallelism: 1", "parallelism: 1\nproducerConfig:\n  batchBuilder: KEY_BASED")
	s := deployShopFrom(t, "twosinks", dir)
	s.ingest(t, generate(t, 6000, 41))
	s.waitForFold(t, 5*time.Minute)

	pulsar, err := pulsarx.Connect(s.svc)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := pulsar.Functions.GetFunctionStatsWithContext(t.Context(), s.tenant, "pipeline", "user_activity_v1-sink")
	if err != nil {
		t.Fatalf("reading the stats of the sink: %v", err)
	}
	if len(stats.Instances) != 2 {
		t.Fatalf("the sink runs %d instances, want 2", len(stats.Instances))
	}
	for _, inst := range stats.Instances {
		t.Logf("sink instance %d applied %d operations", inst.InstanceID, inst.Metrics.ProcessedSuccessfullyTotal)
		if inst.Metrics.ProcessedSuccessfullyTotal == 0 {
			t.Errorf("sink instance %d applied nothing: the subscription did not share the rows", inst.InstanceID)
		}
	}
}

// editFile replaces old with new in file, which must contain old.
func editFile(t testing.TB, file, old, new string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s holds no %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
