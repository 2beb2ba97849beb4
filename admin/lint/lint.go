// Package lint is `foldline lint`: it checks a manifest directory as a
// whole — every document's fields and types, the DAG, and that every
// function binary builds — and reports each problem as file:line: field:
// message, all of them at once. It needs no cluster, so CI runs it.
package lint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
)

// Options are lint's settings.
type Options struct {
	// Dir is the manifest directory. Default manifests.
	Dir string
	// SkipBuild leaves out building the function binaries (faster; misses
	// code that does not compile).
	SkipBuild bool
	// JSON prints the problems as a JSON array instead of lines.
	JSON bool
	// CacheDir receives the built binaries. Default gobuild.DefaultCacheDir.
	CacheDir string
	// Out receives the problems; ErrOut progress.
	Out, ErrOut io.Writer
}

// NewCommand returns `foldline lint`.
func NewCommand() *cobra.Command {
	opts := Options{}
	var output string
	cmd := &cobra.Command{
		Use:   "lint [DIR]",
		Short: "Check manifests: fields, types, the DAG, and that every function builds",
		Long: `Check a manifest directory (default manifests/) without touching any cluster:
unknown fields and wrong types, topics read but written by nothing, cycles, views
with two writers, view columns without a merge rule, fields a declared view names
that the events of its sample lack, function binaries that do not build, and, when
the pipeline names sample events, operations the code emits over them that a view
lacks or contradicts (a column, a merge, the key, another view). Every problem is
printed as file:line: field: message; the exit code is 1 when there is any.`,
		Example: "  foldline lint\n  foldline lint --skip-build -o json manifests/",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = manifest.DefaultDir
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			opts.JSON = output == "json"
			opts.Out, opts.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.SkipBuild, "skip-build", false, "do not build the function binaries")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("-o %q: want text or json: %w", output, exitcode.ErrUsage)
	}
	return nil
}

// Run lints opts.Dir and prints the problems. It returns an error that is
// manifest.ErrInvalid when there are problems.
func Run(ctx context.Context, opts Options) error {
	problems, err := Check(ctx, opts.Dir, !opts.SkipBuild, opts.CacheDir, opts.ErrOut)
	if err != nil {
		return err
	}
	if opts.JSON {
		if problems == nil {
			problems = manifest.Problems{}
		}
		if err := target.WriteJSON(opts.Out, problems); err != nil {
			return err
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(opts.Out, p.String())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s) in %s: %w", len(problems), opts.Dir, manifest.ErrInvalid)
	}
	if !opts.JSON {
		fmt.Fprintf(opts.ErrOut, "%s: no problems\n", opts.Dir)
	}
	return nil
}

// Check returns every problem of the manifests in dir, sorted; with build
// it also builds every binary (into cacheDir, "" for the default). The error is for a directory it cannot read.
func Check(ctx context.Context, dir string, build bool, cacheDir string, progress io.Writer) (manifest.Problems, error) {
	set, err := manifest.Load(dir)
	var problems manifest.Problems
	switch {
	case errors.As(err, &problems):
	case err != nil:
		return nil, err
	}
	if build && set != nil {
		built := buildAll(ctx, set, cacheDir, progress)
		problems = append(problems, built...)
		if len(problems) == 0 {
			builder := &gobuild.Builder{Dir: gobuild.ModuleDir(set.Dir, "."), CacheDir: cacheDir, Progress: progress,
				Platform: gobuild.Platform{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}}
			found, err := checkContracts(ctx, set, builder)
			if err != nil {
				return nil, err
			}
			problems = append(problems, found...)
		}
	}
	return problems.Sorted(), nil
}

// buildAll builds each stage's binary and reports the ones that fail at the
// manifest field that names them.
func buildAll(ctx context.Context, set *manifest.Set, cacheDir string, progress io.Writer) manifest.Problems {
	builder := &gobuild.Builder{Dir: gobuild.ModuleDir(set.Dir, "."), CacheDir: cacheDir, Progress: progress}
	var problems manifest.Problems
	failed := map[string]string{}
	for _, st := range set.Stages() {
		if gobuild.CheckPackage(st.Binary) != nil {
			continue // reported by Load; never handed to go build
		}
		msg, seen := failed[st.Binary]
		if !seen {
			if _, err := builder.Build(ctx, st.Binary); err != nil {
				var be *gobuild.BuildError
				switch {
				case errors.As(err, &be):
					msg = st.Binary + " does not build: " + firstLines(be.Output, 5)
				case errors.Is(err, gobuild.ErrNotAPackage):
					msg = err.Error()
				default:
					return append(problems, st.BinaryProblem("%s could not build: %v", st.Binary, err))
				}
			}
			failed[st.Binary] = msg
		}
		if msg != "" {
			problems = append(problems, st.BinaryProblem("%s", msg))
		}
	}
	return problems
}

// firstLines keeps the first n lines of the compiler's output, joined, so
// that a problem stays one line.
func firstLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		lines = append(lines, strings.TrimSpace(l))
		if len(lines) == n {
			break
		}
	}
	return strings.Join(lines, " | ")
}
