// Package deploy is `foldline plan`, `foldline deploy` and `foldline
// destroy`: it compares the manifests with the cluster and brings the
// cluster to them — tenant, namespaces and their policies, topics, keyspace,
// view tables and the view registry, then every function and sink in DAG
// order, upstream first — and waits until every instance runs.
//
// Deploy is idempotent: each function's user config carries a fingerprint
// of its binary and config (foldline.fingerprint), so a re-run with nothing
// changed changes nothing, and a changed binary or config updates exactly
// the functions it concerns. Binaries are built with the go command into a
// cache directory before anything on the cluster changes.
package deploy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gocql/gocql"
	"github.com/spf13/pflag"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlsession"
)

// Options are plan's and deploy's settings.
type Options struct {
	target.Command
	// CacheDir receives the built binaries. Default gobuild.DefaultCacheDir.
	CacheDir string
	// Platform is what the function binaries are built for. Default
	// linux/amd64.
	Platform gobuild.Platform
	// Binaries, when set, is a directory of prebuilt binaries (foldline
	// build --out) to deploy instead of building.
	Binaries string
	// BinariesKey is the PEM file of the key the index of Binaries must be
	// signed with (its public key, or the private key foldline build
	// signs with). Default gobuild.DefaultSigningKeyFile().
	BinariesKey string
	// KubernetesSecret, when set, gives the functions references to the
	// keys of this Kubernetes secret (in the functions' namespace) instead
	// of the credentials themselves, for Pulsar's Kubernetes runtime:
	// foldline kubernetes-secret prints the secret to create.
	KubernetesSecret string
	// Wait bounds how long deploy waits for every instance to run; 0 does
	// not wait. Default (command) 5m.
	Wait time.Duration
	// Verbose also lists unchanged resources.
	Verbose bool
	// InPlace lets deploy change the code (binary or config, see
	// CodeChange) of a stage that feeds a view's active table in place:
	// the table then holds the old code's results for the ledger up to
	// the change and the new code's after, which the registry records.
	// Without it such a deploy is refused with ErrCodeChange and changes
	// nothing (foldline backfill builds a new version instead).
	InPlace bool
	// Builder, when set, builds (or takes) the binaries instead of one made
	// from the fields above (NewBuilder), so that a caller that built them
	// already, or builds them meanwhile, shares its builds.
	Builder *gobuild.Builder
}

// Result is what deploy did.
type Result struct {
	Plan    *Plan    `json:"plan"`
	Applied []Change `json:"applied"`
}

// session is one connection to the cluster with the manifests loaded.
type session struct {
	set    *manifest.Set
	graph  *manifest.Graph
	pulsar *pulsarx.Clients
	cql    *gocql.Session
	// identity is who the functions run as.
	identity identity
}

func (s *session) Close() {
	if s.cql != nil {
		cqlsession.Close(s.cql)
	}
}

func open(ctx context.Context, opts Options) (*session, error) {
	if err := checkKubernetesSecret(opts.KubernetesSecret); err != nil {
		return nil, err
	}
	set, graph, err := opts.Target.LoadGraph(opts.Dir)
	if err != nil {
		return nil, err
	}
	pulsar, err := pulsarx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	cql, err := cqlx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	id, err := tenantIdentity(ctx, opts.Services, cql, set.Tenant.Name)
	if err != nil {
		cqlsession.Close(cql)
		return nil, err
	}
	return &session{set: set, graph: graph, pulsar: pulsar, cql: cql, identity: id}, nil
}

// builder builds (or takes from o.Binaries) the function binaries:
// o.Builder, or a new one.
func (o Options) builder() *gobuild.Builder {
	if o.Builder != nil {
		return o.Builder
	}
	return o.NewBuilder()
}

// NewBuilder returns a builder of the function binaries as o asks for them.
func (o Options) NewBuilder() *gobuild.Builder {
	return &gobuild.Builder{Dir: gobuild.ModuleDir(o.Dir, "."), CacheDir: o.CacheDir, Platform: o.Platform, Prebuilt: o.Binaries, PrebuiltKey: o.BinariesKey, Progress: o.ErrOut}
}

// RegisterBuildFlags adds the flags that choose how function binaries are
// built: --goos, --goarch, --binaries and --binaries-key.
func (o *Options) RegisterBuildFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Platform.GOOS, "goos", gobuild.DefaultPlatform.GOOS, "GOOS the function binaries are built for (the functions workers')")
	fs.StringVar(&o.Platform.GOARCH, "goarch", gobuild.DefaultPlatform.GOARCH, "GOARCH the function binaries are built for")
	fs.StringVar(&o.Binaries, "binaries", "", "deploy the prebuilt binaries in this directory (foldline build --out) instead of building them")
	fs.StringVar(&o.BinariesKey, "binaries-key", "", "the key --binaries' index must be signed with: foldline build's public key (PEM) or its private key (default: "+gobuild.SigningKeyName+" in foldline's config folder)")
	fs.StringVar(&o.KubernetesSecret, "kubernetes-secret", "", "give functions references to this Kubernetes secret's keys instead of the credentials (Pulsar's Kubernetes runtime; foldline kubernetes-secret prints it)")
}

func (o Options) planner(s *session) *planner {
	return &planner{
		set: s.set, graph: s.graph, pulsar: s.pulsar, cql: s.cql,
		builder:          o.builder(),
		hosts:            o.Services.SinkHosts(),
		adminURL:         o.Services.PulsarAdminURL,
		cluster:          o.Services.Describe(),
		kubernetesSecret: o.KubernetesSecret,
		identity:         s.identity,
		progress:         o.ErrOut,
		inPlace:          o.InPlace,
	}
}

// MakePlan returns what deploy would change, changing nothing (it builds
// the binaries to know whether they changed).
func MakePlan(ctx context.Context, opts Options) (*Plan, error) {
	s, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	plan, _, err := opts.planWithBackfills(ctx, s)
	return plan, err
}

// planWithBackfills plans the manifests' DAG less the stages backfills
// retired (noted in the plan: deploy must not bring them back), and the
// code changes under the views' active tables. It returns the planner too,
// which records the code once the plan is applied.
func (o Options) planWithBackfills(ctx context.Context, s *session) (*Plan, *planner, error) {
	b, err := readBackfilled(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	reduced, notes := b.withoutRetired(s)
	pl := o.planner(reduced)
	plan, err := pl.makePlan(ctx)
	if err != nil {
		return nil, nil, err
	}
	carrying := map[string]bool{}
	for _, st := range b.carrying {
		carrying[st.FullName()] = true
	}
	for i, c := range plan.Changes {
		if c.Action == Note && c.Kind == "function" && carrying[c.Name] {
			plan.Changes[i].Details = []string{"a backfill's copy of a view's path (foldline backfill): left alone"}
		}
	}
	plan.Changes = append(plan.Changes, notes...)
	if err := pl.planCodeChanges(ctx, s.graph, b); err != nil {
		return nil, nil, err
	}
	return plan, pl, nil
}

// Deploy brings the cluster to the manifests and waits for the instances.
// A plan that changes the code under a view's active table in place is
// refused with ErrCodeChange, before anything changes, unless
// opts.InPlace; the registry's history records what deploy did to the
// code of each table.
func Deploy(ctx context.Context, opts Options) (*Result, error) {
	s, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	plan, pl, err := opts.planWithBackfills(ctx, s)
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: plan}
	changes := inPlace(plan.CodeChanges)
	if len(changes) > 0 && !opts.InPlace {
		return res, codeChangeError(changes)
	}
	by := "deploy"
	var positions map[string]string
	if len(changes) > 0 {
		by = "deploy --in-place"
		// Read before the change: events after these went through the
		// new code.
		if positions, err = pl.ledgerPositions(ctx); err != nil {
			return res, err
		}
	}
	res.Applied, err = apply(ctx, plan, opts.ErrOut)
	if err != nil {
		return res, err
	}
	if err := pl.recordCode(ctx, by, positions); err != nil {
		return res, fmt.Errorf("recording the views' code in the registry (everything else is deployed; deploy again, with the same flags, to record it): %w", err)
	}
	// Paths whose rollback grace is over stop here (there is no daemon).
	if _, err := RetireExpired(ctx, Cluster{Set: s.set, Graph: s.graph, Pulsar: s.pulsar, CQL: s.cql}, opts.ErrOut, time.Now()); err != nil {
		fmt.Fprintf(opts.ErrOut, "warning: retiring the paths whose rollback grace is over (foldline views gc tries again): %v\n", err)
	}
	if path, err := s.identity.writeCredentials(s.set.Tenant.Name); err != nil {
		return res, err
	} else if path != "" {
		fmt.Fprintf(opts.ErrOut, "tenant %s runs as role %s; its credentials are in %s\n", s.set.Tenant.Name, s.identity.Role, path)
	}
	if opts.Wait > 0 {
		started := slices.ContainsFunc(res.Applied, func(c Change) bool { return c.Kind == "function" })
		return res, waitRunning(ctx, s.pulsar, plan, opts.Wait, opts.ErrOut, started)
	}
	return res, nil
}
