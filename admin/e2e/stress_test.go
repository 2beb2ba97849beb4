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
	// The test manifests turn the sinks' trace on: when the views differ,
	// the failure says which sink process applied or skipped what. The
	// re-keyed view's sink instances take 20 messages at a time, so that
	// they keep running out of permits and the broker holds their keys'
	// entries back for redelivery (where Key_Shared's ordering is the most
	// intricate) when one of them is killed.
	dir := testenv.PartitionedShopManifests(t, partitionCount)
	view := filepath.Join(dir, "views", "product_sales.yaml")
	data, err := os.ReadFile(view)
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Replace(string(data), "    trace: true\n", "    trace: true\n    receiverQueueSize: 20\n", 1)
	if small == string(data) {
		t.Fatalf("%s turns no trace on to add the receiver queue after", view)
	}
	if err := os.WriteFile(view, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	s := deployShopFrom(t, "stress", dir)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// Every stage, the re-keyed view's sink twice as often; batches of
	// 200 to 2000 events, so that a kill finds the stages idle or busy.
	targets := append([]string{"product_sales_v1-sink"}, partitionedStages...)
	events := generate(t, kills*2000, seed)
	for range kills {
		n := 200 + rng.IntN(1800)
		s.ingest(t, events[:n])
		events = events[n:]
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		s.killOneInstance(t, targets[rng.IntN(len(targets))], rng)
	}
	s.waitForFold(t, 8*time.Minute)
}
