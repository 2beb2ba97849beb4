package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/testenv"
)

// TestPartitionedStressKills is TestPartitionedShopSurvivesKilledInstances
// with many more kills, aimed at the re-keyed view's path: product_sales
// gathers every ledger partition, so it is where an operation applied out
// of its partition's order, or a row written by two sink instances at
// once, would show. It runs only when FOLDLINE_STRESS_KILLS gives the
// number of kills (each after a small batch of events, before the stages
// are through it), as it takes minutes:
//
//	FOLDLINE_STRESS_KILLS=60 go test ./admin/e2e -run TestPartitionedStressKills -timeout 40m
func TestPartitionedStressKills(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("FOLDLINE_STRESS_KILLS"))
	if kills <= 0 {
		t.Skip("set FOLDLINE_STRESS_KILLS to the number of kills to run this stress test")
	}
	dir := testenv.PartitionedShopManifests(t, partitionCount)
	// Every operation's fate in the sink's log (its Trace setting), to
	// tell an operation delivered after a later one of its partition from
	// one applied and then overwritten.
	view := filepath.Join(dir, "views", "product_sales.yaml")
	data, err := os.ReadFile(view)
	if err != nil {
		t.Fatal(err)
	}
	traced := strings.Replace(string(data), "    row_cache: 0\n", "    row_cache: 0\n    trace: true\n", 1)
	if traced == string(data) {
		t.Fatalf("%s sets no row_cache to add trace after", view)
	}
	if err := os.WriteFile(view, []byte(traced), 0o644); err != nil {
		t.Fatal(err)
	}
	s := deployShopFrom(t, "stress", dir)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// The sink of the re-keyed view twice as often as the functions that
	// feed it.
	targets := []string{"product_sales_v1-sink", "product-sales", "product_sales_v1-sink", "purchases"}
	const batch = 400
	events := generate(t, kills*batch, seed)
	for i := range kills {
		s.ingest(t, events[i*batch:(i+1)*batch])
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		s.killOneInstance(t, targets[rng.IntN(len(targets))], rng)
	}
	s.waitForFold(t, 8*time.Minute)
}
