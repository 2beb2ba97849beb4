package deploy

import (
	"context"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

// Job is a function that does one piece of a command's work on the
// cluster instead of a stage's (a backfill's run, foldline backfill
// --engine cluster): it works on the one message its input topic gets, and
// the worker restarts it, with that message unacknowledged, when its
// process dies.
type Job struct {
	// Stage names it (tenant, namespace, name) and its input (Inputs[0],
	// SubName); nothing else of it is read.
	Stage *manifest.Stage
	// Binary is what the worker runs.
	Binary gobuild.Binary
	// UserConfig is its user config.
	UserConfig map[string]any
	// MemoryLimitMB is the runtime's soft memory limit.
	MemoryLimitMB int
}

// CreateJob creates job's function, unless it exists, with the tenant's
// credentials in its secrets as a sink gets them (its Pulsar token, its
// Cassandra login): a job works in the tenant's own namespace and
// keyspace.
func CreateJob(ctx context.Context, opts Options, pulsar *pulsarx.Clients, cql *gocql.Session, set *manifest.Set, job Job) error {
	st := job.Stage
	_, err := pulsar.Functions.GetFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	switch {
	case err == nil:
		return nil
	case !pulsarx.IsNotFound(err):
		return fmt.Errorf("reading function %s: %w", st.FullName(), err)
	}
	id, err := tenantIdentity(ctx, opts.Services, cql, set.Tenant.Name)
	if err != nil {
		return err
	}
	if err := createTopic(ctx, pulsar, st.Inputs[0], 0); err != nil {
		return err
	}
	uc := map[string]any{pf.UserConfigMemoryLimitMB: job.MemoryLimitMB}
	for k, v := range job.UserConfig {
		uc[k] = v
	}
	conf := goFunction(st, uc)
	conf.Secrets = id.secrets(true, opts.KubernetesSecret)
	fmt.Fprintf(opts.ErrOut, "creating function %s (reads %v)\n", st.FullName(), st.Inputs)
	if err := uploadPinned(job.Binary, func(path string) error { return pulsar.Functions.CreateFuncWithContext(ctx, &conf, path) }); err != nil {
		return fmt.Errorf("creating function %s: %w", st.FullName(), err)
	}
	return nil
}
