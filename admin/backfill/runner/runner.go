// Package runner is the main of a backfill's runner on the cluster
// (foldline backfill --engine cluster): one binary, built for the path
// from its transformations' one-line mains (chainmain.RunnerSource), that
// the functions worker runs as a function. Its one input is the job
// (backfill.RunJob): it runs the fused backfill of the path there, as
// foldline backfill --engine fused does on the operator's machine, and
// runs itself with pf.LocalFlag as the path's chain, confined as a local
// run's functions are. The worker starts it again when its process dies,
// and the job, unacknowledged, resumes from the backfill's checkpoint.
package runner

import (
	"context"
	"fmt"
	"os"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/run"
)

// Main runs the runner: the path's chain of ps when started as a local
// run (by the runner itself), else the function that runs the job.
func Main(ps ...transform.Processor) {
	if len(os.Args) > 1 && os.Args[1] == pf.LocalFlag {
		run.MainChain(ps...)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner: finding its own binary:", err)
		os.Exit(1)
	}
	pf.Start(func(ctx context.Context, job []byte) error { return backfill.RunJob(ctx, job, self) })
}
