// Package version is foldline version (and foldline --version): which
// build of Foldline this is — its module version and commit, from the
// binary's own build information — the Go release that built it, and the
// Pulsar and Cassandra releases it targets. A bug report that quotes it
// says what ran against what.
package version

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/targetversion"
)

// Unknown stands for what the build information does not say: a version
// or commit go run, go test or a build outside a git checkout leaves out.
const (
	UnknownVersion = "devel"
	UnknownCommit  = "unknown"
)

// Info describes a build of foldline; it is also version -o json.
type Info struct {
	// Version is the main module's version (a tag, or a pseudo-version
	// go build derives from the commit); UnknownVersion when unknown.
	Version string `json:"version"`
	// Commit is the git revision built (vcs.revision); UnknownCommit
	// when unknown.
	Commit string `json:"commit"`
	// Modified is true when the build's tree had uncommitted changes
	// (vcs.modified).
	Modified bool `json:"modified"`
	// Go is the Go release that built the binary.
	Go string `json:"go"`
	// Platform is the binary's GOOS/GOARCH.
	Platform string `json:"platform"`
	// Pulsar and Cassandra are the releases Foldline targets
	// (internal/targetversion).
	Pulsar    string `json:"pulsar"`
	Cassandra string `json:"cassandra"`
}

// Current describes the running binary.
func Current() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
}

// FromBuildInfo describes the build bi records; bi may be nil (no build
// information), which leaves the version and commit unknown.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{
		Version:   UnknownVersion,
		Commit:    UnknownCommit,
		Go:        runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		Pulsar:    targetversion.Pulsar,
		Cassandra: targetversion.Cassandra,
	}
	if bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	info.Go = cmp.Or(bi.GoVersion, info.Go)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = cmp.Or(s.Value, UnknownCommit)
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// Write prints info as text, or as JSON when asJSON.
func Write(w io.Writer, info Info, asJSON bool) error {
	if asJSON {
		return target.WriteJSON(w, info)
	}
	commit := info.Commit
	if info.Modified {
		commit += " (modified: built with uncommitted changes)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "foldline\t%s\n", info.Version)
	fmt.Fprintf(tw, "commit\t%s\n", commit)
	fmt.Fprintf(tw, "go\t%s %s\n", info.Go, info.Platform)
	fmt.Fprintf(tw, "pulsar\t%s (targeted)\n", info.Pulsar)
	fmt.Fprintf(tw, "cassandra\t%s (targeted)\n", info.Cassandra)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the version: %w", err)
	}
	return nil
}

// Text is Write's text form of info, for foldline --version.
func Text(info Info) string {
	var b strings.Builder
	_ = Write(&b, info, false) // a strings.Builder does not fail
	return b.String()
}

// Options are foldline version's.
type Options struct {
	// Output is text or json. Default text.
	Output string
	// Out receives the version.
	Out io.Writer
}

// Run prints the running binary's version.
func Run(opts Options) error {
	asJSON, err := (&target.Flags{Output: cmp.Or(opts.Output, "text")}).JSON()
	if err != nil {
		return err
	}
	return Write(opts.Out, Current(), asJSON)
}

// NewCommand returns foldline version.
func NewCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print Foldline's version and commit, its Go version, and the Pulsar and Cassandra versions it targets",
		Long: `Print which build of foldline this is: the module version and the git commit it
was built from (marked modified when the tree had uncommitted changes; devel and
unknown for a build that does not record them, such as go run), the Go release and
platform, and the Pulsar and Cassandra releases Foldline targets (those the local
stack of scripts/ runs). foldline --version prints the same.`,
		Example: "  foldline version\n  foldline version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			return Run(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	return cmd
}
