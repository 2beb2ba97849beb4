package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ShopManifestsDir returns the folder of the shop manifests that tests
// load: a frozen copy of manifests/ in internal/testenv/testdata, not
// manifests/ itself, so that a view or function added to the shipped shop
// changes no test's expectations (the stages, views, names and counts the
// tests assert). The shipped manifests/ are checked by foldline lint in
// scripts/test and by the tests that say they load them. Tests read this
// folder and never write into it; ShopManifests gives a copy to edit.
func ShopManifestsDir() string {
	return filepath.Join(RepoRoot(), "internal", "testenv", "testdata", "shop-manifests")
}

// ShopManifests copies the frozen shop manifests (ShopManifestsDir) into a
// temporary folder and returns the copy's path, for a test that edits them.
func ShopManifests(t testing.TB) string {
	t.Helper()
	src := ShopManifestsDir()
	dst := filepath.Join(t.TempDir(), "manifests")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copying the shop manifests %s: %v", src, err)
	}
	return dst
}

// PartitionedShopManifests returns a copy of the shop's manifests laid out
// to scale out: a ledger of n partitions, every pipeline topic with n
// partitions, every function n instances on failover subscriptions (one
// active instance per partition; the stateful stages without a cache of
// settled keys), every sink n instances on key_shared
// subscriptions of operations batched by key, with its row cache off.
// foldline lint accepts it as exact.
func PartitionedShopManifests(t testing.TB, n int) string {
	t.Helper()
	dir := ShopManifests(t)
	edit := func(file, old, new string) {
		t.Helper()
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s holds no %q", file, old)
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), old, new)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("tenant.yaml", "    partitions: 0", fmt.Sprintf("    partitions: %d", n))
	var topics strings.Builder
	topics.WriteString("topics:\n")
	for _, topic := range []string{"distinct", "valid", "purchases", "user-activity-ops", "product-sales-ops", "orders", "sku-refunds-ops", "enriched-purchases"} {
		fmt.Fprintf(&topics, "  - name: persistent://shop/pipeline/%s\n    partitions: %d\n", topic, n)
	}
	edit("pipeline.yaml", "kind: Pipeline\n", "kind: Pipeline\n"+topics.String())
	for _, f := range []string{"dedup", "validate", "user-activity", "purchases", "product-sales", "orders", "sku-refunds", "enrich-purchases"} {
		file := "functions/" + f + ".yaml"
		edit(file, "parallelism: 1", fmt.Sprintf("parallelism: %d", n))
		edit(file, "subscriptionType: key_shared", "subscriptionType: failover")
	}
	// Instances take partitions over from one another: the stateful stages
	// read each key's state afresh once it has settled.
	for _, f := range []string{"dedup", "sku-refunds", "enrich-purchases"} {
		edit("functions/"+f+".yaml", "  subscriptionType: failover", "  subscriptionType: failover\n  state_cache: 0")
	}
	// The last stages batch by key, so that the sinks' key_shared
	// subscriptions hand each row's operations to one instance.
	for _, f := range []string{"user-activity", "product-sales", "sku-refunds"} {
		edit("functions/"+f+".yaml", fmt.Sprintf("parallelism: %d", n), fmt.Sprintf("parallelism: %d\nproducerConfig:\n  batchBuilder: KEY_BASED", n))
	}
	for _, v := range []string{"user_activity", "product_sales", "sku_refunds"} {
		// trace: every operation's fate in the sinks' logs, which the
		// end-to-end tests' failure reports read.
		edit("views/"+v+".yaml", "  parallelism: 1\n  userConfig:", fmt.Sprintf("  parallelism: %d\n  userConfig:\n    subscriptionType: key_shared\n    row_cache: 0\n    trace: true", n))
	}
	return dir
}
