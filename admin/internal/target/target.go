// Package target is what the cluster commands (plan, deploy, destroy,
// status, views, ledger, backfill) share: the manifest directory argument,
// the --tenant and --keyspace overrides that let tests and previews deploy
// the same manifests under another name, the service addresses, the output
// streams and -o json.
package target

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/services"
)

// Command is what every cluster command takes from its command line and
// environment; each command's Options embed it.
type Command struct {
	// Dir is the manifest directory. Default manifests.
	Dir    string
	Target Flags
	// Services are the addresses of Pulsar and Cassandra. Default: from
	// the environment (FOLDLINE_*), else the local stack's.
	Services services.Services
	// Out receives the command's result; ErrOut progress.
	Out, ErrOut io.Writer
}

// Bind fills c from cmd's command line: the DIR argument, the services of
// the environment and cmd's output streams; it reports whether -o json was
// asked for.
func (c *Command) Bind(cmd *cobra.Command, args []string) (asJSON bool, err error) {
	c.Dir = Dir(args)
	c.Services = Services()
	c.Out, c.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
	return c.Target.JSON()
}

// Flags are the shared flags.
type Flags struct {
	// Tenant replaces the manifests' tenant (and renames its topics).
	Tenant string
	// Keyspace replaces the manifests' keyspace. Default: the manifests'
	// keyspace, or, with --tenant, a keyspace named after the tenant.
	Keyspace string
	// Output is text or json.
	Output string
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Tenant, "tenant", "", "deploy under this tenant instead of the manifests' (topics follow)")
	fs.StringVar(&f.Keyspace, "keyspace", "", "use this Cassandra keyspace (default: the manifests', or the tenant's name with --tenant)")
	fs.StringVarP(&f.Output, "output", "o", "text", "output format: text or json")
}

// JSON reports whether -o json was asked for; it checks the value.
func (f *Flags) JSON() (bool, error) {
	switch f.Output {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("-o %q: want text or json: %w", f.Output, exitcode.ErrUsage)
}

// Dir returns the directory argument or the default.
func Dir(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return manifest.DefaultDir
}

// Load reads and checks the manifests and applies the overrides.
func (f *Flags) Load(dir string) (*manifest.Set, error) {
	set, err := manifest.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("reading manifests (run foldline lint %s for details):\n%w", dir, err)
	}
	keyspace := f.Keyspace
	if keyspace == "" && f.Tenant != "" {
		keyspace = manifest.KeyspaceFor(f.Tenant)
	}
	set.Retarget(f.Tenant, keyspace)
	return set, nil
}

// Services returns the service addresses (FOLDLINE_* environment variables
// or the local stack's defaults).
func Services() services.Services { return services.FromEnv() }

// LoadGraph is Load plus the manifests' DAG, for the commands that walk it.
func (f *Flags) LoadGraph(dir string) (*manifest.Set, *manifest.Graph, error) {
	set, err := f.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	graph, problems := set.Graph()
	if err := problems.Err(); err != nil {
		return nil, nil, err
	}
	return set, graph, nil
}

// WriteJSON is the output of every command's -o json: v, indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
