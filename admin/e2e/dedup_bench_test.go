package e2e

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"testing"

	"github.com/foldline/foldline/internal/benchreport"
	"github.com/foldline/foldline/internal/proc"
	"github.com/foldline/foldline/internal/testenv"
)

// BenchmarkStatefulStages deploys the shop, ingests
// FOLDLINE_BENCH_EVENTS shop events (default 50000) and waits until the
// views equal the fold; then it prints the CPU each function instance and
// Cassandra spent per event, so that the stateful stages (dedup and
// sku-refunds, which read and save keyed states) can be set against the
// stateless ones (validate, user-activity) that handle as many events, and
// the rows of each state table. scripts/bench (stateful) reports dedup's
// and enrich-purchases' CPU per event against validate's, stateless
// stages of the same shape (one event in, at most one out, the same
// events), and the shop's events/s end to end.
//
//	FOLDLINE_BENCH_EVENTS=50000 go test ./admin/e2e -run '^$' -bench StatefulStages -benchtime 1x -timeout 30m
func BenchmarkStatefulStages(b *testing.B) {
	n := testenv.EnvInt(b, "FOLDLINE_BENCH_EVENTS", 50000)
	for b.Loop() {
		s := deployShop(b, "statebench")
		stages := []string{"dedup", "validate", "user-activity", "orders", "sku-refunds", "enrich-purchases"}
		pids := map[string]int{"cassandra": testenv.ServicePID(b, "cassandra")}
		for _, st := range stages {
			pids[st] = testenv.InstancePIDs(b, s.tenant, pipelineNS, st)[0]
		}
		before := map[string]time.Duration{}
		for name, pid := range pids {
			before[name] = proc.CPUTime(pid)
		}
		events := generate(b, n, 61)
		start := time.Now()
		s.ingest(b, events)
		s.waitForFold(b, 20*time.Minute)
		took := time.Since(start)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "process\tCPU µs/event\t\n")
		for _, name := range append(stages, "cassandra") {
			used := proc.CPUTime(pids[name]) - before[name]
			fmt.Fprintf(tw, "%s\t%.1f\t\n", name, float64(used.Microseconds())/float64(n))
		}
		tw.Flush()
		perEvent := func(name string) float64 {
			return float64((proc.CPUTime(pids[name]) - before[name]).Nanoseconds()) / 1000 / float64(n)
		}
		cpu := func(stage, kind string) benchreport.Figure {
			return benchreport.Figure{Bench: "stateful", Figure: stage + kind + " CPU per event", Value: perEvent(stage), Unit: "µs"}
		}
		if err := benchreport.Emit(
			benchreport.Figure{Bench: "stateful", Figure: fmt.Sprintf("shop of %d events, ingest to views equal to the fold", n), Value: float64(n) / took.Seconds(), Unit: "events/s"},
			cpu("validate", " (stateless)"),
			cpu("dedup", " (stateful)").Against("validate", perEvent("validate")),
			cpu("enrich-purchases", " (stateful)").Against("validate", perEvent("validate")),
			cpu("cassandra", ""),
		); err != nil {
			b.Fatal(err)
		}
		var buckets, orders int
		_ = s.session.Query(`SELECT COUNT(*) FROM ` + s.keyspace + `.dedup_state`).Scan(&buckets)
		_ = s.session.Query(`SELECT COUNT(*) FROM ` + s.keyspace + `.sku_refunds_state`).Scan(&orders)
		fmt.Printf("%d events ingested and folded into the views in %s (%.0f events/s); state rows: dedup %d (user, bucket), sku-refunds %d\n",
			n, took.Round(100*time.Millisecond), float64(n)/took.Seconds(), buckets, orders)
	}
}
