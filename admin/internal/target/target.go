// Package target is what the cluster commands (plan, deploy, destroy,
// status, views, ledger, backfill) share: the manifest directory argument,
// the --tenant and --keyspace overrides that let tests and previews deploy
// the same manifests under another name, the service addresses, the output
// streams and -o json.
package target

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlname"
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
	if c.Services, err = services.Load(); err != nil {
		return false, err
	}
	c.Out, c.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
	return c.Target.JSON()
}

// Flags are the shared flags.
type Flags struct {
	// Tenant replaces the manifests' tenant (and renames its topics).
	Tenant string
	// Keyspace names the keyspace. With manifests it may only repeat the
	// tenant's (manifest.KeyspaceFor); without (views) it picks one.
	Keyspace string
	// Output is text or json.
	Output string
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Tenant, "tenant", "", "deploy under this tenant instead of the manifests' (topics follow)")
	fs.StringVar(&f.Keyspace, "keyspace", "", "the tenant's Cassandra keyspace: its name with - as _ (views: any keyspace, without manifests)")
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
	tenant := cmp.Or(f.Tenant, set.Tenant.Name)
	if f.Tenant != "" {
		if err := manifest.CheckTenantName(f.Tenant); err != nil {
			return nil, fmt.Errorf("--tenant %w: %w", err, exitcode.ErrUsage)
		}
	}
	keyspace := manifest.KeyspaceFor(tenant)
	if f.Keyspace != "" && f.Keyspace != keyspace {
		return nil, fmt.Errorf("--keyspace %q: tenant %s's keyspace is %s (a keyspace is never shared between tenants): %w", f.Keyspace, tenant, keyspace, exitcode.ErrUsage)
	}
	if err := set.Retarget(f.Tenant, keyspace); err != nil {
		return nil, fmt.Errorf("moving the manifests to tenant %s:\n%w", tenant, err)
	}
	return set, nil
}

// CheckKeyspace checks a --keyspace given without manifests (views).
func (f *Flags) CheckKeyspace() error {
	if err := cqlname.Check("--keyspace", f.Keyspace); err != nil {
		return fmt.Errorf("%w: %w", err, exitcode.ErrUsage)
	}
	return nil
}

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
