package gen

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// NewCommand returns `foldline gen`.
func NewCommand() *cobra.Command {
	var (
		opts       Options
		start, end string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate shop events as JSON lines",
		Long: `Generate shop events (page_view, add_to_cart, purchase, refund) as JSON lines, one
event per line, for the demo, the tests and the benchmarks. The same flags give
byte-identical output. A few users and skus are heavy (Zipf), refunds name only
earlier orders, event times drift slightly out of order, and --malformed sets the
share of lines that the validate stage must reject.`,
		Example: "  foldline gen --events 100000 --users 5000 --skus 500 --seed 7 -o events.jsonl\n  foldline gen --events 100000 --end now --interval 6s -o recent.jsonl",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if start != "" {
				t, err := time.Parse(time.RFC3339Nano, start)
				if err != nil {
					return fmt.Errorf("reading --start: %w", err)
				}
				opts.Start = t
			}
			switch end {
			case "":
			case "now":
				opts.End = time.Now().UTC().Truncate(time.Second)
			default:
				t, err := time.Parse(time.RFC3339Nano, end)
				if err != nil {
					return fmt.Errorf("reading --end: want RFC 3339 or now: %w", err)
				}
				opts.End = t
			}
			return runGen(cmd, opts, output)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Events, "events", 1000, "number of events (lines) to write")
	f.IntVar(&opts.Users, "users", 1000, "number of distinct users")
	f.IntVar(&opts.SKUs, "skus", 100, "number of distinct products")
	f.Uint64Var(&opts.Seed, "seed", 0, "picks the stream; the same seed gives the same bytes")
	f.StringVar(&opts.IDPrefix, "id-prefix", "", "goes before every event and order id: streams of different seeds into one ledger need their own (a ledger counts an event once per id)")
	f.Float64Var(&opts.Malformed, "malformed", 0.01, "share of malformed lines, 0 to 1")
	f.StringVar(&start, "start", DefaultStart.Format(time.RFC3339), "time of the first event, RFC 3339")
	f.StringVar(&end, "end", "", "time of the last event instead of --start, RFC 3339 or now (windowed views keep only the last window)")
	f.DurationVar(&opts.Interval, "interval", DefaultInterval, "mean time between events")
	f.DurationVar(&opts.Jitter, "jitter", DefaultJitter, "events' times move by up to ± this much")
	f.StringVarP(&output, "output", "o", "-", "file to write, - for standard output")
	return cmd
}

func runGen(cmd *cobra.Command, opts Options, output string) (err error) {
	var w io.Writer = cmd.OutOrStdout()
	if output != "-" {
		file, err := os.Create(output)
		if err != nil {
			return fmt.Errorf("creating %s: %w", output, err)
		}
		defer func() {
			if cerr := file.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", output, cerr)
			}
		}()
		w = file
	}
	began := time.Now()
	stats, err := Generate(w, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "generated %d events (%d page views, %d add to carts, %d purchases, %d refunds, %d malformed) in %v\n",
		stats.Lines, stats.PageViews, stats.AddToCarts, stats.Purchases, stats.Refunds, stats.Malformed, time.Since(began).Round(time.Millisecond))
	return nil
}
