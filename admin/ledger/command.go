package ledger

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/target"
)

// NewCommand returns `foldline ledger` with its subcommands status and offload.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Where the ledger's segments are (BookKeeper or tiered storage); offload them",
		Long: `The ledger keeps every event. Its closed segments move to tiered storage (the S3
server) once the namespace's offload thresholds from the tenant manifest are passed,
and reads reach them transparently. These commands show where each ledger topic's
segments are and offload the closed ones now.`,
	}
	cmd.AddCommand(newStatusCommand(), newOffloadCommand())
	return cmd
}

func newStatusCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "Entries and bytes of each ledger topic in BookKeeper and offloaded, and the last offload's outcome",
		Long: `For each ledger topic of the tenant manifest in DIR (default manifests/): the
segments, entries and bytes still in BookKeeper (the open segment included) and
those in tiered storage, how much of BookKeeper is closed and could be offloaded,
and the broker's status of the last offload with its error. An entry is a batch of
events as the producer sent it.`,
		Example: "  foldline ledger status\n  foldline ledger status --tenant shop-test -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			report, err := Status(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return target.WriteJSON(cmd.OutOrStdout(), report)
			}
			report.Write(cmd.OutOrStdout())
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	return cmd
}

func newOffloadCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "offload [DIR]",
		Short: "Offload every closed ledger segment to tiered storage now, and wait for it",
		Long: `Asks the broker to offload every closed segment of each ledger topic of the tenant
manifest in DIR (default manifests/) and waits, with progress, until it reports
success or an error. It first checks that the S3 endpoint answers. The
BookKeeper copies are deleted after the namespace's deletion lag.`,
		Example: "  foldline ledger offload\n  foldline ledger offload --tenant shop-test --wait 2m",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			results, err := Offload(cmd.Context(), opts)
			if asJSON {
				if werr := target.WriteJSON(opts.Out, results); werr != nil && err == nil {
					err = werr
				}
			} else {
				writeResults(opts.Out, results)
			}
			return err
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().DurationVar(&opts.Wait, "wait", 10*time.Minute, "how long to wait for each topic's offload")
	return cmd
}

// Write prints the report as a table, one line per topic.
func (r *Report) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TOPIC\tBOOKKEEPER\tOFFLOADABLE\tOFFLOADED\tLAST OFFLOAD\n")
	for _, t := range r.Topics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Topic, t.BookKeeper, t.Offloadable, t.Offloaded, t.OffloadStatus)
	}
	tw.Flush()
	for _, t := range r.Topics {
		if t.LastError != "" {
			fmt.Fprintf(w, "\n%s: last offload failed: %s\n", t.Topic, t.LastError)
			if t.Setting != "" {
				fmt.Fprintf(w, "  check %s\n", t.Setting)
			}
		}
	}
}

func writeResults(w io.Writer, results []OffloadResult) {
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Fprintf(w, "%s: nothing to offload (%s)\n", r.Topic, r.Skipped)
			continue
		}
		fmt.Fprintf(w, "%s: offloaded %s\n", r.Topic, r.Offloaded)
	}
}

// String is "3 seg, 1500 entries, 2.1 MiB".
func (a Amount) String() string {
	return fmt.Sprintf("%d seg, %d entries, %s", a.Segments, a.Entries, bytesString(a.Bytes))
}

func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
