package clidoc

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// NewCommand returns the hidden docs command: foldline docs cli writes the
// CLI reference of the tree it belongs to (go generate runs it).
func NewCommand() *cobra.Command {
	docs := &cobra.Command{
		Use:    "docs",
		Short:  "Write documentation generated from the code",
		Hidden: true,
	}
	var out string
	cli := &cobra.Command{
		Use:     "cli",
		Short:   "Write the CLI reference (docs/cli.md) from the command tree",
		Example: "  foldline docs cli --out docs/cli.md",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "-" {
				return Write(cmd.OutOrStdout(), cmd.Root())
			}
			var buf bytes.Buffer
			if err := Write(&buf, cmd.Root()); err != nil {
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("writing the CLI reference: %w", err)
			}
			return nil
		},
	}
	cli.Flags().StringVar(&out, "out", "-", "file to write, - for standard output")
	docs.AddCommand(cli)
	return docs
}
