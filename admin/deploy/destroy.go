package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/owner"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/tenantid"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/internal/cqlname"
)

// DestroyOptions are destroy's settings.
type DestroyOptions struct {
	Options
	// Tables also drops the views' tables (every registered version) and
	// their registry entries.
	Tables bool
	// Purge removes everything the manifests created: also every topic
	// (the ledger too), the namespaces, the tenant, the keyspace, and the
	// tenant's own Cassandra role and credentials file. For throwaway
	// tenants (tests, previews).
	Purge bool
	// Yes confirms Tables and Purge, which remove data: without it
	// Destroy refuses them with ErrNotConfirmed and removes nothing.
	Yes bool
}

// ErrNotConfirmed is the error for a destroy that would remove data
// (Tables, Purge) without confirmation (DestroyOptions.Yes, the prompt).
var ErrNotConfirmed = errors.New("not confirmed")

// Destroy removes the pipeline: every function and sink of the manifests
// (downstream first) and their subscriptions; with Tables the view tables;
// with Purge everything else (the tenant's own Cassandra role and
// credentials file too). It returns what it removed. Tables and Purge
// without Yes are refused with ErrNotConfirmed (a usage error) before
// anything is removed.
func Destroy(ctx context.Context, opts DestroyOptions) ([]string, error) {
	if opts.removesData() && !opts.Yes {
		return nil, fmt.Errorf("destroy %s removes data: pass --yes to confirm (nothing was removed): %w: %w", opts.dataFlags(), ErrNotConfirmed, exitcode.ErrUsage)
	}
	s, b, err := openForDestroy(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	t := s.set.Tenant
	stages := append(slices.Clone(s.graph.Order), b.carrying...)
	removed, err := DeleteStages(ctx, s.pulsar, stages, opts.ErrOut)
	if err != nil {
		return removed, err
	}
	dropped, err := DropStateTables(ctx, s.cql, t.Keyspace, stages, opts.ErrOut)
	removed = append(removed, dropped...)
	if err != nil {
		return removed, err
	}
	note := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Fprintln(opts.ErrOut, line)
		removed = append(removed, line)
	}
	if opts.removesData() {
		views, err := viewTables(ctx, s)
		if err != nil {
			return removed, err
		}
		for _, v := range views {
			// Every version, the active one too: destroy --tables is
			// confirmed and means the view goes.
			for _, table := range v.tables {
				if err := s.cql.Query(fmt.Sprintf(`DROP TABLE IF EXISTS %s`, cqlname.Table(v.view.Keyspace, table))).WithContext(ctx).Exec(); err != nil {
					return removed, fmt.Errorf("dropping table %s.%s: %w", v.view.Keyspace, table, err)
				}
				note("dropped table %s.%s", v.view.Keyspace, table)
			}
			if v.registered {
				if err := registry.Remove(ctx, s.cql, v.view.Keyspace, v.view.Name); err != nil {
					return removed, err
				}
			}
		}
	}
	if opts.Purge {
		// The name's next generation first, so that a purge that stops
		// half way cannot leave the next tenant of this name the
		// credentials of this one (see tenantGeneration).
		if s.identity.Role != "" {
			generation, err := nextGeneration(ctx, s.cql, t.Name, s.identity.generation)
			if err != nil {
				return removed, err
			}
			note("tenant name %s: the next tenant of this name gets credentials of its own (role %s)", t.Name, tenantid.RoleFor(t.Name, generation))
		}
		more, err := purge(ctx, s.pulsar, s.cql, t.Name, t.Keyspace)
		if err == nil {
			var forgotten []string
			forgotten, err = s.identity.forget(ctx, s.cql, t.Name)
			more = append(more, forgotten...)
		}
		for _, line := range more {
			note("%s", line)
		}
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// openTenant opens a session on an existing tenant and reads what its
// backfills changed.
func openTenant(ctx context.Context, opts Options) (*session, *backfilled, error) {
	s, err := open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := s.pulsar.RequireTenant(ctx, s.set.Tenant.Name); err != nil {
		s.Close()
		return nil, nil, err
	}
	b, err := readBackfilled(ctx, s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, b, nil
}

func (o DestroyOptions) removesData() bool { return o.Tables || o.Purge }

// dataFlags names the flags that make destroy remove data.
func (o DestroyOptions) dataFlags() string {
	if o.Purge {
		return "--purge"
	}
	return "--tables"
}

// viewTableSet is a view's tables: the manifests' and every version the
// registry knows.
type viewTableSet struct {
	view       *manifest.View
	tables     []string
	registered bool
}

// viewTables returns the tables of every view of the manifests.
func viewTables(ctx context.Context, s *session) ([]viewTableSet, error) {
	var out []viewTableSet
	for _, v := range s.set.Views {
		set := viewTableSet{view: v, tables: []string{v.Table()}}
		entry, err := registry.Get(ctx, s.cql, v.Keyspace, v.Name)
		if err != nil && !isMissingTable(err) {
			return nil, err
		}
		for _, ver := range entry.Versions {
			if !slices.Contains(set.tables, ver.Table) {
				set.tables = append(set.tables, ver.Table)
			}
		}
		set.registered = len(entry.Versions) > 0
		out = append(out, set)
	}
	return out, nil
}

// openForDestroy opens the tenant for Destroy and PreviewDestroy and, when
// opts remove data, checks before anything is removed or listed that the
// keyspace is the tenant's own (never another tenant's).
func openForDestroy(ctx context.Context, opts DestroyOptions) (*session, *backfilled, error) {
	s, b, err := openTenant(ctx, opts.Options)
	if err != nil {
		return nil, nil, err
	}
	if opts.removesData() {
		t := s.set.Tenant
		if _, err := owner.Check(ctx, s.cql, t.Keyspace, t.Name); err != nil {
			s.Close()
			return nil, nil, err
		}
	}
	return s, b, nil
}

// PreviewDestroy lists what Destroy with opts would remove, one line per
// thing, without removing anything: the functions, with Tables the view
// tables, with Purge also the tenant, its namespaces, their topics with
// their entry counts, the keyspace with its tables, and the tenant's own
// Cassandra role and credentials file.
func PreviewDestroy(ctx context.Context, opts DestroyOptions) ([]string, error) {
	s, b, err := openForDestroy(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	t := s.set.Tenant
	lines := []string{fmt.Sprintf("functions and sinks (those deployed): the manifests' %d, backfills' %d, with their subscriptions (and the state tables of stateful ones)", len(s.graph.Order), len(b.carrying))}
	if opts.removesData() {
		views, err := viewTables(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			for _, table := range v.tables {
				lines = append(lines, fmt.Sprintf("table %s.%s (view %s)", v.view.Keyspace, table, v.view.Name))
			}
		}
	}
	if !opts.Purge {
		return lines, nil
	}
	lines = append(lines, "tenant "+t.Name)
	namespaces, err := s.pulsar.Admin.Namespaces().GetNamespacesWithContext(ctx, t.Name)
	if err != nil {
		return nil, fmt.Errorf("listing namespaces of %s: %w", t.Name, err)
	}
	for _, full := range namespaces {
		lines = append(lines, "namespace "+full)
		ns, err := utils.GetNamespaceName(full)
		if err != nil {
			return nil, fmt.Errorf("naming namespace %s: %w", full, err)
		}
		topics, err := listTopics(ctx, s.pulsar, *ns)
		if err != nil {
			return nil, err
		}
		for _, topic := range topics {
			n, err := pulsarx.Entries(ctx, s.pulsar, topic.name)
			if err != nil {
				return nil, err
			}
			lines = append(lines, fmt.Sprintf("topic %s (%d entries)", topic.name, n))
		}
	}
	var tables []string
	iter := s.cql.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, t.Keyspace).WithContext(ctx).Iter()
	for name := ""; iter.Scan(&name); {
		tables = append(tables, name)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("listing the tables of keyspace %s: %w", t.Keyspace, err)
	}
	lines = append(lines, fmt.Sprintf("keyspace %s with its %d tables %v", t.Keyspace, len(tables), tables))
	roles, credentials, err := s.identity.leftovers(ctx, s.cql, t.Name)
	if err != nil {
		return nil, err
	}
	for _, role := range roles {
		lines = append(lines, "cassandra role "+role+" (the tenant's own login)")
	}
	if credentials != "" {
		lines = append(lines, "credentials file "+credentials)
	}
	return lines, nil
}

// workerCleanupWait is how long deleteSubscription leaves a just-deleted
// function's subscription to the worker, which deletes it itself once the
// instance has stopped (cleanupSubscription). Deleting it at the same time
// as the worker does can hang one of the two requests on the broker ("Cursor
// is already being deleted"): the worker's hung request then holds its only
// scheduler thread for a minute, and no other function anywhere is started
// or stopped meanwhile.
const workerCleanupWait = 15 * time.Second

// subscriptionRequestTimeout bounds one admin request of deleteSubscription,
// so that one the broker never answers is tried again.
const subscriptionRequestTimeout = 10 * time.Second

// deleteSubscription removes a subscription the function's cleanup left
// behind. When the function was just deleted (workerCleans), the worker is
// given workerCleanupWait to delete it first; after that, a subscription
// whose consumers are still closing is refused for a moment, so it retries
// for a while, then forces it. how says, when it was not gone at once, how
// long that took and what the broker answered until then.
func deleteSubscription(ctx context.Context, pulsar *pulsarx.Clients, topic, sub string, workerCleans bool) (gone bool, how string, err error) {
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		return false, "", fmt.Errorf("naming topic %s: %w", topic, err)
	}
	subs := pulsar.Admin.Subscriptions()
	start := time.Now()
	leaveUntil := start
	if workerCleans {
		leaveUntil = start.Add(workerCleanupWait)
	}
	forceAfter := leaveUntil.Add(30 * time.Second)
	var refused error
	waited := func() string {
		if refused == nil {
			return ""
		}
		return fmt.Sprintf(" after %s (refused until then: %v)", time.Since(start).Round(100*time.Millisecond), refused)
	}
	request := func(do func(context.Context) error) error {
		rctx, cancel := context.WithTimeout(ctx, subscriptionRequestTimeout)
		defer cancel()
		return do(rctx)
	}
	for {
		var names []string
		err := request(func(rctx context.Context) (err error) {
			names, err = subs.ListWithContext(rctx, *tn)
			return err
		})
		switch {
		case pulsarx.IsNotFound(err) || (err == nil && !slices.Contains(names, sub)):
			return false, "", nil
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			refused = err // a request the broker did not answer: try again
		case err != nil:
			return false, "", fmt.Errorf("listing subscriptions of %s: %w", topic, err)
		case time.Now().Before(leaveUntil):
			// The worker deletes it once the instance has stopped.
		case time.Now().Before(forceAfter):
			err = request(func(rctx context.Context) error { return subs.DeleteWithContext(rctx, *tn, sub) })
			if err == nil || pulsarx.IsNotFound(err) {
				return err == nil, waited(), nil
			}
			refused = err
		default:
			err = request(func(rctx context.Context) error { return subs.ForceDeleteWithContext(rctx, *tn, sub) })
			if err != nil && !pulsarx.IsNotFound(err) {
				return false, "", fmt.Errorf("deleting subscription %s on %s%s: %w", sub, topic, waited(), err)
			}
			return true, " by force" + waited(), nil
		}
		// The worker's cleanup, or an instance exiting, still connected:
		// an instance stops and the worker deletes its subscription about
		// 120 ms after the function's delete returns here, which a backfill's
		// retire and a destroy wait for, stage after stage.
		wait := 200 * time.Millisecond
		switch {
		case time.Now().After(leaveUntil):
			wait = time.Second
		case time.Since(start) < time.Second:
			wait = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// purge deletes every topic and namespace of tenant, the tenant, and the
// keyspace.
func purge(ctx context.Context, pulsar *pulsarx.Clients, cql *gocql.Session, tenant, keyspace string) ([]string, error) {
	var done []string
	namespaces, err := pulsar.Admin.Namespaces().GetNamespacesWithContext(ctx, tenant)
	if err != nil {
		return done, fmt.Errorf("listing namespaces of %s: %w", tenant, err)
	}
	for _, full := range namespaces {
		// Functions the manifests do not declare (a backfill's) would hold
		// their topics open.
		tenantName, nsName, _ := strings.Cut(full, "/")
		names, err := pulsar.Functions.GetFunctionsWithContext(ctx, tenantName, nsName)
		if err != nil && !pulsarx.IsNotFound(err) {
			return done, fmt.Errorf("listing functions of %s: %w", full, err)
		}
		var leftovers []*manifest.Stage
		for _, name := range names {
			conf, err := pulsar.Functions.GetFunctionWithContext(ctx, tenantName, nsName, name)
			if pulsarx.IsNotFound(err) {
				continue
			}
			if err != nil {
				return done, fmt.Errorf("reading function %s/%s: %w", full, name, err)
			}
			leftovers = append(leftovers, stageOf(conf))
		}
		// Their subscriptions too, as destroy does: deleting the topics
		// while the worker deletes those can hang the worker (see
		// workerCleanupWait).
		removed, err := DeleteStages(ctx, pulsar, leftovers, io.Discard)
		done = append(done, removed...)
		if err != nil {
			return done, err
		}
		ns, err := utils.GetNamespaceName(full)
		if err != nil {
			return done, fmt.Errorf("naming namespace %s: %w", full, err)
		}
		// An instance of a function just deleted may still be stopping and
		// recreate a topic as it goes (its producer reconnects): the broker
		// then refuses to delete the namespace. Delete what reappeared and
		// try again for a while.
		deadline := time.Now().Add(time.Minute)
		for {
			deleted, err := deleteTopics(ctx, pulsar, *ns)
			done = append(done, deleted...)
			if err != nil {
				return done, err
			}
			err = pulsar.Admin.Namespaces().DeleteNamespaceWithContext(ctx, full)
			if err == nil || pulsarx.IsNotFound(err) {
				break
			}
			if !pulsarx.IsConflict(err) || time.Now().After(deadline) {
				return done, fmt.Errorf("deleting namespace %s: %w", full, err)
			}
			select {
			case <-ctx.Done():
				return done, ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}
		done = append(done, "deleted namespace "+full)
	}
	if err := pulsar.Admin.Tenants().DeleteWithContext(ctx, tenant); err != nil && !pulsarx.IsNotFound(err) {
		return done, fmt.Errorf("deleting tenant %s: %w", tenant, err)
	}
	done = append(done, "deleted tenant "+tenant)
	if err := cql.Query(`DROP KEYSPACE IF EXISTS ` + cqlname.Quote(keyspace)).WithContext(ctx).Exec(); err != nil {
		return done, fmt.Errorf("dropping keyspace %s: %w", keyspace, err)
	}
	return append(done, "dropped keyspace "+keyspace), nil
}

// stageOf is what DeleteStages needs of a deployed function no manifest
// declares: its name, the topics it consumes by name (not by pattern) and
// its subscription (subName, or the worker's default, the full name).
func stageOf(conf utils.FunctionConfig) *manifest.Stage {
	st := &manifest.Stage{Tenant: conf.Tenant, Namespace: conf.Namespace, Name: conf.Name,
		Inputs: slices.Clone(conf.Inputs), SubName: conf.SubName}
	for _, topic := range slices.Sorted(maps.Keys(conf.InputSpecs)) {
		if !conf.InputSpecs[topic].RegexPattern && !slices.Contains(st.Inputs, topic) {
			st.Inputs = append(st.Inputs, topic)
		}
	}
	if st.SubName == "" {
		st.SubName = st.FullName()
	}
	return st
}

// namespaceTopic is a topic of a namespace: a partitioned topic (whole) or
// a non-partitioned one.
type namespaceTopic struct {
	name           string
	tn             utils.TopicName
	nonPartitioned bool
}

// listTopics returns the topics of namespace ns, a partitioned topic once
// (not its partitions).
func listTopics(ctx context.Context, pulsar *pulsarx.Clients, ns utils.NameSpaceName) ([]namespaceTopic, error) {
	partitioned, plain, err := pulsar.Admin.Topics().ListWithContext(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("listing topics of %s: %w", ns.String(), err)
	}
	var out []namespaceTopic
	for _, list := range []struct {
		names          []string
		nonPartitioned bool
	}{{partitioned, false}, {plain, true}} {
		for _, topic := range list.names {
			tn, err := utils.GetTopicName(topic)
			if err != nil {
				return nil, fmt.Errorf("naming topic %s: %w", topic, err)
			}
			if list.nonPartitioned && tn.GetPartitionIndex() >= 0 {
				continue // a partition: goes with its partitioned topic
			}
			out = append(out, namespaceTopic{name: topic, tn: *tn, nonPartitioned: list.nonPartitioned})
		}
	}
	return out, nil
}

// deleteTopics deletes every topic of namespace ns, partitioned ones whole.
func deleteTopics(ctx context.Context, pulsar *pulsarx.Clients, ns utils.NameSpaceName) ([]string, error) {
	topics, err := listTopics(ctx, pulsar, ns)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, topic := range topics {
		if err := pulsar.Admin.Topics().DeleteWithContext(ctx, topic.tn, true, topic.nonPartitioned); err != nil && !pulsarx.IsNotFound(err) {
			return done, fmt.Errorf("deleting topic %s: %w", topic.name, err)
		}
		done = append(done, "deleted topic "+topic.name)
	}
	return done, nil
}

// isMissingTable reports whether a CQL error says the keyspace or table is
// not there (a registry that was never created).
func isMissingTable(err error) bool {
	var reqErr gocql.RequestError
	return errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeInvalid
}
