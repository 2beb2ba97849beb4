package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/progress"
)

// NewPlanCommand returns `foldline plan`.
func NewPlanCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "plan [DIR]",
		Short: "Show what deploy would change on the cluster",
		Long: `Compare the manifests in DIR (default manifests/) with Pulsar and Cassandra and
show what deploy would change: + create, ~ update, -/+ replace, = unchanged (with -v),
! a note about something deploy leaves alone. It builds the function binaries to
tell whether they changed, and changes nothing.

A stage whose binary or config changed under a view's active table is noted as
such ("user-activity's binary changed: user_activity_v1 would no longer equal the
fold of the ledger under the new code"): deploy refuses it unless --in-place.`,
		Example: "  foldline plan\n  foldline plan -o json --tenant shop-preview",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			plan, err := MakePlan(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return target.WriteJSON(opts.Out, plan)
			}
			plan.Write(opts.Out, opts.Verbose)
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	opts.RegisterBuildFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "also list unchanged resources")
	cmd.Flags().BoolVar(&opts.InPlace, "in-place", false, "plan a deploy --in-place")
	return cmd
}

// NewDeployCommand returns `foldline deploy`; backfill runs foldline
// backfill for --backfill.
func NewDeployCommand(backfill Backfiller) *cobra.Command {
	var (
		opts          Options
		withBackfills bool
	)
	cmd := &cobra.Command{
		Use:   "deploy [DIR]",
		Short: "Create or update the tenant, topics, tables and functions of the manifests",
		Long: `Bring Pulsar and Cassandra to the manifests in DIR (default manifests/): build the
function binaries, create or update the tenant, its namespaces and their policies, the
topics, the keyspace, the view tables and the view registry, then create or update the
functions and sinks in DAG order (upstream first), and wait until every instance runs.
Re-running it with nothing changed changes nothing. Progress goes to stderr.

A changed binary or config of a stage that feeds a view's active table is refused,
and nothing is changed: the table would hold the old code's results for history and
the new code's from now on, equal to the fold of the ledger under neither. Build a
new version with the new code instead (foldline backfill VIEW: it switches when
caught up; --backfill does it for every view concerned, then deploys the rest: a
backfill whose copies a later one shares runs with the deployed engine), or
pass --in-place to update the running functions anyway; the registry then records,
for the table, which stages changed and at which ledger positions (foldline views
describe VIEW shows it).`,
		Example: "  foldline deploy\n  foldline deploy --tenant shop-test --wait 10m\n  foldline deploy --backfill\n  foldline deploy --in-place",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			if withBackfills && opts.InPlace {
				return fmt.Errorf("--backfill and --in-place exclude each other: %w", exitcode.ErrUsage)
			}
			deployNow := Deploy
			if withBackfills {
				deployNow = func(ctx context.Context, opts Options) (*Result, error) {
					return DeployWithBackfills(ctx, opts, backfill)
				}
			}
			res, err := deployNow(cmd.Context(), opts)
			if res != nil {
				if asJSON {
					if jsonErr := target.WriteJSON(opts.Out, res); jsonErr != nil && err == nil {
						err = jsonErr
					}
				} else if len(res.Applied) == 0 && err == nil {
					fmt.Fprintf(opts.Out, "Nothing to change: the cluster matches the manifests (%d resources).\n", res.Plan.Count(Keep))
				} else {
					fmt.Fprintf(opts.Out, "Applied %d of %d changes (%s).\n", len(res.Applied), len(res.Plan.Pending()), res.Plan.Summary())
				}
			}
			return err
		},
	}
	opts.Target.Register(cmd.Flags())
	opts.RegisterBuildFlags(cmd.Flags())
	cmd.Flags().DurationVar(&opts.Wait, "wait", 5*time.Minute, "how long to wait for every instance to run (0: do not wait)")
	cmd.Flags().BoolVar(&opts.InPlace, "in-place", false, "change the code of stages feeding a view's active table in place (the table then mixes old and new code; the registry records where)")
	cmd.Flags().BoolVar(&withBackfills, "backfill", false, "for a code change under a view's active table, build a new version of the view with foldline backfill (it switches when caught up), then deploy the rest")
	return cmd
}

// NewDestroyCommand returns `foldline destroy`.
func NewDestroyCommand() *cobra.Command {
	var opts DestroyOptions
	cmd := &cobra.Command{
		Use:   "destroy [DIR]",
		Short: "Remove the pipeline's functions and subscriptions (and, with flags, more)",
		Long: `Remove the functions and sinks of the manifests in DIR (default manifests/),
downstream first, and their subscriptions. The ledger, topics and tables stay unless
asked: --tables also drops the views' tables (every version, the active one too) and
their registry entries; --purge removes everything deploy created, the ledger included
(topics, namespaces, tenant, keyspace, the tenant's own Cassandra role and credentials
file): meant for throwaway tenants.

--tables and --purge remove data: destroy first prints what will go (functions,
tables, and with --purge the tenant, namespaces, topics with their entry counts, the
keyspace, role and credentials file), then asks on a terminal; --yes confirms without asking. Without --yes
and with no terminal on stdin it removes nothing and exits 2.`,
		Example: "  foldline destroy\n  foldline destroy --tenant shop-test --purge --yes",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			if opts.removesData() {
				if err := confirmDestroy(cmd.Context(), &opts, cmd.InOrStdin()); err != nil {
					return err
				}
			}
			removed, err := Destroy(cmd.Context(), opts)
			if asJSON {
				if removed == nil {
					removed = []string{}
				}
				if jsonErr := target.WriteJSON(opts.Out, removed); jsonErr != nil && err == nil {
					err = jsonErr
				}
			} else if err == nil {
				fmt.Fprintf(opts.Out, "Removed %d resources.\n", len(removed))
			}
			return err
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.Tables, "tables", false, "also drop the views' tables and registry entries")
	cmd.Flags().BoolVar(&opts.Purge, "purge", false, "remove everything: topics (ledger too), namespaces, tenant, keyspace, the tenant's role and credentials")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "confirm --tables or --purge without being asked")
	return cmd
}

// confirmDestroy prints what a destroy that removes data will remove and,
// without --yes, asks on the terminal; with no terminal to ask on it refuses
// with ErrNotConfirmed (exit 2). Nothing is removed before the answer.
func confirmDestroy(ctx context.Context, opts *DestroyOptions, in io.Reader) error {
	lines, err := PreviewDestroy(ctx, *opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "foldline destroy %s will remove:\n", opts.dataFlags())
	for _, line := range lines {
		fmt.Fprintln(opts.ErrOut, "  "+line)
	}
	if opts.Yes {
		return nil
	}
	if !progress.IsTerminal(in) {
		return fmt.Errorf("destroy %s removes data and stdin is not a terminal to ask on: pass --yes to confirm (nothing was removed): %w: %w", opts.dataFlags(), ErrNotConfirmed, exitcode.ErrUsage)
	}
	fmt.Fprint(opts.ErrOut, "Remove all of this? [y/N] ")
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return fmt.Errorf("destroy %s cancelled (nothing was removed): %w", opts.dataFlags(), ErrNotConfirmed)
	}
	opts.Yes = true
	return nil
}
