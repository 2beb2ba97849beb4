package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/testenv"
)

// BenchmarkTrainingSet times the whole foldline training-set command, as
// built binaries, on a ledger of FOLDLINE_BENCH_EVENTS shop events
// (default 200000): FOLDLINE_BENCH_CLI (this checkout's CLI) with
// FOLDLINE_BENCH_LABELS labels (default 20000) over user_activity and
// product_sales, and over user_activity alone; and, when
// FOLDLINE_BENCH_BEFORE_CLI names another build (the CLI before the
// sweep), both on the first FOLDLINE_BENCH_BEFORE_LABELS labels (default
// 3000) over user_activity. Each CLI runs once on one label first, so
// that the functions' binaries are built and cached before anything is
// timed. The labels are of random users and skus at random times of the
// ingest. With FOLDLINE_BENCH_JSON the figures are written there, one JSON
// object a line. scripts/bench-training-set --command runs it.
func BenchmarkTrainingSet(b *testing.B) {
	cli, before := os.Getenv("FOLDLINE_BENCH_CLI"), os.Getenv("FOLDLINE_BENCH_BEFORE_CLI")
	if cli == "" {
		b.Skip("FOLDLINE_BENCH_CLI names no foldline binary: run scripts/bench-training-set --command")
	}
	first := time.Now()
	s, n, _ := deployBenchLedger(b, "tsetbench")
	last := time.Now()
	nLabels := testenv.EnvInt(b, "FOLDLINE_BENCH_LABELS", 20_000)
	nBefore := min(testenv.EnvInt(b, "FOLDLINE_BENCH_BEFORE_LABELS", 3000), nLabels)
	expected := s.expected()
	users := slices.Sorted(maps.Keys(expected.UserActivity))
	skus := slices.Sorted(maps.Keys(expected.ProductSales))
	rng := rand.New(rand.NewPCG(43, 45))
	dir := b.TempDir()
	lines := []string{"user,sku,label_time,churned"}
	for i := range nLabels {
		at := first.Add(time.Duration(rng.Int64N(int64(last.Sub(first))))).UTC()
		lines = append(lines, fmt.Sprintf("%s,%s,%s,%d", users[rng.IntN(len(users))], skus[rng.IntN(len(skus))], at.Format(time.RFC3339Nano), i%2))
	}
	labelFile := func(name string, n int) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines[:n+1], "\n")+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	all, few, one := labelFile("labels.csv", nLabels), labelFile("labels-before.csv", nBefore), labelFile("one.csv", 1)
	manifests := filepath.Join(testenv.RepoRoot(), "manifests")
	runs := 0
	run := func(bin, labels string, views ...string) time.Duration {
		runs++
		args := []string{"training-set", views[0], manifests}
		if len(views) > 1 {
			args = []string{"training-set", manifests}
			for _, v := range views {
				args = append(args, "--view", v)
			}
		}
		args = append(args, "--tenant", s.tenant, "--labels", labels, "--out", filepath.Join(dir, fmt.Sprintf("set-%d.csv", runs)))
		cmd := exec.CommandContext(b.Context(), bin, args...)
		cmd.Dir = testenv.RepoRoot()
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		d := time.Since(start)
		b.Logf("%s %s (%s): %s", bin, strings.Join(args[:len(args)-6], " "), d.Round(10*time.Millisecond), strings.TrimSpace(string(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:])))
		return d
	}
	type figure struct {
		Run     string  `json:"run"`
		Events  int     `json:"events"`
		Labels  int     `json:"labels"`
		Views   int     `json:"views"`
		Seconds float64 `json:"seconds"`
	}
	var figs []figure
	for b.Loop() {
		run(cli, one, "user_activity") // builds the functions' binaries
		figs = append(figs,
			figure{"after: --view user_activity --view product_sales", n, nLabels, 2, run(cli, all, "user_activity", "product_sales").Seconds()},
			figure{"after: user_activity", n, nLabels, 1, run(cli, all, "user_activity").Seconds()})
		if before != "" {
			run(before, one, "user_activity")
			figs = append(figs,
				figure{"before: user_activity (a refold per label)", n, nBefore, 1, run(before, few, "user_activity").Seconds()},
				figure{"after: user_activity", n, nBefore, 1, run(cli, few, "user_activity").Seconds()})
		}
	}
	for _, f := range figs {
		fmt.Printf("%-50s %8d events %7d labels %d views %7.1f s %8.0f labels/s\n", f.Run, f.Events, f.Labels, f.Views, f.Seconds, float64(f.Labels)/f.Seconds)
	}
	if path := os.Getenv("FOLDLINE_BENCH_JSON"); path != "" {
		var buf strings.Builder
		for _, f := range figs {
			line, _ := json.Marshal(f)
			buf.Write(append(line, '\n'))
		}
		if err := os.WriteFile(path, []byte(buf.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
