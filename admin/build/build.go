// Package build is `foldline build`: it builds the binary of every function
// and sink the manifests name, for the functions workers' platform, into a
// directory with an index of their digests, so that CI builds once and
// `foldline deploy --binaries DIR` (or a container image that carries the
// directory) deploys exactly those bytes without a Go toolchain.
package build

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
)

// Options are build's settings.
type Options struct {
	// Dir is the manifest directory. Default manifests.
	Dir string
	// Out receives the binaries and their index.
	Out      string
	Platform gobuild.Platform
	// SigningKey is the Ed25519 private key (PEM) the index is signed
	// with, made when it does not exist. Default
	// gobuild.DefaultSigningKeyFile(), in foldline's config folder.
	SigningKey string
	// Stdout receives the list of binaries; Progress one line per build.
	Stdout, Progress io.Writer
}

// NewCommand returns `foldline build`.
func NewCommand() *cobra.Command {
	opts := Options{}
	cmd := &cobra.Command{
		Use:   "build [DIR]",
		Short: "Build every function and sink binary the manifests name into a directory",
		Long: `Build the binary of every function and sink that the manifests in DIR (default
manifests/) name — packages under functions/ or sinks/ of the module, built from a
copy of its git-tracked files only (untracked files, such as the local stack's
state, are never seen) — for --goos/--goarch (default linux/amd64, statically), into --out,
with an index of their SHA-256 digests (` + gobuild.IndexFile + `), signed with
--signing-key (an Ed25519 key, made on the first build, default
~/.config/foldline/` + gobuild.SigningKeyName + `). foldline deploy --binaries DIR then
deploys those exact binaries without building: it refuses an index that key did
not sign, and a binary whose digest is not the index's. A deploy on another machine
needs the key, or only its public half (` + gobuild.SigningKeyName + `.pub), given with
--binaries-key.`,
		Example: "  foldline build --out dist/\n  foldline deploy --binaries dist/",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = target.Dir(args)
			if opts.Out == "" {
				return fmt.Errorf("--out is required: %w", exitcode.ErrUsage)
			}
			opts.Stdout, opts.Progress = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "directory to build the binaries into")
	cmd.Flags().StringVar(&opts.Platform.GOOS, "goos", gobuild.DefaultPlatform.GOOS, "GOOS to build for")
	cmd.Flags().StringVar(&opts.Platform.GOARCH, "goarch", gobuild.DefaultPlatform.GOARCH, "GOARCH to build for")
	cmd.Flags().StringVar(&opts.SigningKey, "signing-key", "", "Ed25519 private key (PEM) to sign the index with, made when missing (default: "+gobuild.SigningKeyName+" in foldline's config folder)")
	return cmd
}

// Run builds every binary into opts.Out and writes the index.
func Run(ctx context.Context, opts Options) error {
	set, err := manifest.Load(opts.Dir)
	if err != nil {
		return fmt.Errorf("reading manifests (run foldline lint %s for details):\n%w", opts.Dir, err)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", opts.Out, err)
	}
	keyFile := cmp.Or(opts.SigningKey, gobuild.DefaultSigningKeyFile())
	key, created, err := gobuild.SigningKey(keyFile)
	if err != nil {
		return err
	}
	if created && opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "made the key that signs the binaries' index: %s (public key %s.pub; deploy --binaries verifies with either)\n", keyFile, keyFile)
	}
	b := &gobuild.Builder{Dir: gobuild.ModuleDir(opts.Dir, "."), CacheDir: opts.Out, Platform: opts.Platform, Progress: opts.Progress}
	var pkgs []string
	for _, st := range set.Stages() {
		if !slices.Contains(pkgs, st.Binary) {
			pkgs = append(pkgs, st.Binary)
		}
	}
	for _, pkg := range pkgs {
		bin, err := b.Build(ctx, pkg)
		if err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
		fmt.Fprintf(opts.Stdout, "%s  %s  %s\n", bin.SHA256, bin.Path, pkg)
	}
	platform := opts.Platform
	if len(pkgs) > 0 {
		platform = b.Built()[pkgs[0]].Platform
	}
	return gobuild.WriteIndex(opts.Out, platform, b.Built(), key)
}
