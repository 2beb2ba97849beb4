// Command foldline is Foldline's CLI. Each command lives in its own package
// under admin/ and is added here; this file only builds the root and maps
// errors to exit codes.
//
// Exit codes: see exitcode.Help (admin/internal/exitcode), shown by
// foldline --help. Cobra's own usage errors (an unknown command, wrong
// arguments) give 1: it does not type them.
//
// docs/cli.md, the command reference, is generated from the tree built
// here; TestCLIReferenceIsCurrent fails when it is stale.
//
//go:generate go run . docs cli --out ../../../docs/cli.md
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/backfill"
	"github.com/foldline/foldline/admin/build"
	"github.com/foldline/foldline/admin/config"
	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/clidoc"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/ledger"
	"github.com/foldline/foldline/admin/lint"
	"github.com/foldline/foldline/admin/metrics"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/admin/trainingset"
	"github.com/foldline/foldline/admin/ui"
	"github.com/foldline/foldline/admin/verify"
	"github.com/foldline/foldline/admin/version"
	"github.com/foldline/foldline/admin/views"
	"github.com/foldline/foldline/internal/services"
)

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "foldline",
		Short:         "Turn a Pulsar ledger of domain events into views in Cassandra",
		Long:          "Turn a Pulsar ledger of domain events into views in Cassandra.\n\n" + exitcode.Help,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what foldline version prints; cobra handles
		// the flag when Version is set.
		Version: version.Text(version.Current()),
	}
	root.SetVersionTemplate("{{.Version}}")
	// Declared here, without cobra's -v shorthand: plan's -v is --verbose.
	root.Flags().Bool("version", false, "print foldline's version (as foldline version does)")
	// Connection settings: each flag sets its environment variable, which
	// services.Load reads, so that a flag wins over the environment and the
	// config file's context, and reaches every command the same way.
	flagged := []services.Setting{services.ConfigSetting, services.ContextSetting}
	for _, s := range services.Settings {
		if !s.NoFlag {
			flagged = append(flagged, s)
		}
	}
	for _, s := range flagged {
		root.PersistentFlags().String(s.Flag, "", s.Usage+" [$"+s.Env+"]")
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		for _, s := range flagged {
			if f := cmd.Flags().Lookup(s.Flag); f != nil && f.Changed {
				if err := os.Setenv(s.Env, f.Value.String()); err != nil {
					return fmt.Errorf("setting %s from --%s: %w", s.Env, s.Flag, err)
				}
			}
		}
		return nil
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
	})
	root.AddCommand(gen.NewCommand())
	root.AddCommand(ingest.NewCommand())
	root.AddCommand(lint.NewCommand())
	root.AddCommand(build.NewCommand())
	root.AddCommand(deploy.NewPlanCommand())
	root.AddCommand(deploy.NewDeployCommand(func(ctx context.Context, opts deploy.Options, view string, sharedLater bool) error {
		_, err := backfill.Run(ctx, backfill.Options{Options: opts, View: view, Engine: backfill.EngineForDeploy(sharedLater)}, false)
		return err
	}))
	root.AddCommand(deploy.NewDestroyCommand())
	root.AddCommand(deploy.NewKubernetesSecretCommand())
	root.AddCommand(status.NewCommand())
	root.AddCommand(views.NewCommand())
	root.AddCommand(ledger.NewCommand())
	root.AddCommand(backfill.NewCommand())
	root.AddCommand(config.NewCommand())
	root.AddCommand(ui.NewCommand())
	root.AddCommand(metrics.NewCommand())
	root.AddCommand(verify.NewCommand())
	root.AddCommand(trainingset.NewCommand())
	root.AddCommand(version.NewCommand())
	root.AddCommand(clidoc.NewCommand())
	return root
}

func main() {
	os.Exit(run())
}

func run() int {
	err := newRoot().Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "foldline:", err)
	var usage *usageError
	if errors.As(err, &usage) {
		return exitcode.Usage
	}
	return exitcode.For(err)
}
