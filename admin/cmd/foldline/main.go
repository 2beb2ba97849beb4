// Command foldline is Foldline's CLI. Each command lives in its own package
// under admin/ and is added here; this file only builds the root and maps
// errors to exit codes.
//
// Exit codes: 0 success, 1 the command failed (cobra's own usage errors, an
// unknown command or wrong arguments, land here too: it does not type them),
// 2 a bad flag.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/admin/ingest"
)

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "foldline",
		Short:         "Turn a Pulsar ledger of domain events into views in Cassandra",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
	})
	root.AddCommand(gen.NewCommand())
	root.AddCommand(ingest.NewCommand())
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
		return 2
	}
	return 1
}
