package ingest

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/target"
)

// NewCommand builds `foldline ingest`.
func NewCommand() *cobra.Command {
	var (
		opts   Options
		output string
	)
	cmd := &cobra.Command{
		Use:   "ingest --tenant NAME FILE...",
		Short: "Publish JSON-lines events to a tenant's ledger, exactly once per line",
		Long: `Publish JSON-lines events to a tenant's ledger topic, in file order, with a
progress line (bar, rate, ETA) on standard error. "-" reads standard input.

Each line becomes one ledger event: the --key-field value is its message key
(the entity key), the --time-field value (RFC 3339) its event time. A line that
is not valid JSON is published as it is: the pipeline's validate stage sends
it to the dead-letter topic with the reason, so nothing is lost silently.

Re-running ingest on the same file after a crash publishes no line twice and
reports how many lines were already in the ledger: the ledger namespace
deduplicates by producer name (derived from the file's content) and sequence
id (the line number). A different file, however similar, is never taken for
a re-run. Standard input is published line by line as it comes.

Each event counts once in the views whatever publishes it again (another
file, standard input again, a live producer, long after) when the tenant's
manifest names its events' id field (eventId): the ledger's only reader is
then the dedup stage, which passes an event on the first time its id comes
under its key.`,
		Example: `  foldline gen --events 100000 --seed 7 | foldline ingest --tenant shop -
  tail -f app-events.jsonl | foldline ingest --tenant shop -
  foldline ingest --tenant shop events-2026-11-*.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			opts.Stdin = cmd.InOrStdin()
			opts.Progress = cmd.ErrOrStderr()
			results, err := Run(cmd.Context(), opts)
			if output == "json" {
				if jerr := target.WriteJSON(cmd.OutOrStdout(), results); jerr != nil {
					return jerr
				}
				return err
			}
			for _, r := range results {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d events published, %d skipped (already in the ledger), %d blank lines\n",
					r.File, r.Published, r.Skipped, r.Blank)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Tenant, "tenant", "", "tenant whose ledger receives the events (required)")
	f.StringVar(&opts.Topic, "topic", "", "ledger topic (default persistent://TENANT/ledger/events)")
	f.StringVar(&opts.KeyField, "key-field", "user", "JSON field whose value is the message key")
	f.StringVar(&opts.TimeField, "time-field", "time", "JSON field whose RFC 3339 value is the event time")
	f.StringVar(&opts.Compression, "compression", DefaultCompression, "compression of the ledger's batches: none, lz4, zlib, zstd or snappy (every Pulsar client reads them)")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}
