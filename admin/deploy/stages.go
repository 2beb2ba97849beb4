package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/ledgerepoch"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/sinks/cassandra"
)

// CreateStages deploys stages that no manifest declares under their own
// names — a backfill's copy of a view's path (manifest.ForkPath) — next to
// the live DAG: it builds their binaries, creates their output and
// dead-letter topics, then the functions upstream first, and waits up to
// opts.Wait for every instance to run. The sinks' tables are created
// meanwhile (createTables), each sink created once its table is. A
// function that exists already is left as it is, so a re-run carries on.
func CreateStages(ctx context.Context, opts Options, pulsar *pulsarx.Clients, cql *gocql.Session, set *manifest.Set, stages []*manifest.Stage) error {
	tableOf, stopTables := createTables(ctx, cql, set, stages)
	defer stopTables()
	builder := opts.builder()
	id, err := tenantIdentity(ctx, opts.Services, cql, set.Tenant.Name)
	if err != nil {
		return err
	}
	epochs, err := stageEpochs(ctx, pulsar, set, stages)
	if err != nil {
		return err
	}
	// A copy's readers are copies deployed with it: each may write its
	// origin as one property.
	single := map[string]bool{}
	for _, st := range stages {
		single[st.FullName()] = true
	}
	functions, err := renderFunctions(ctx, set, stages, builder, opts.Services.SinkHosts(), opts.Services.PulsarAdminURL, id, opts.KubernetesSecret, epochs, single)
	if err != nil {
		return err
	}
	for _, st := range stages {
		if err := createTopic(ctx, pulsar, st.Output, st.OutputPartitions); err != nil {
			return err
		}
		if err := createTopic(ctx, pulsar, st.DeadLetterTopic(), 0); err != nil {
			return err
		}
	}
	created := false
	// One after the other, upstream first (each sink after its table):
	// created at once, the functions of a partitioned backfill made the
	// worker answer 500 (java.util.concurrent.TimeoutException) in CI.
	for _, f := range functions {
		st := f.Stage
		_, err := pulsar.Functions.GetFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name)
		switch {
		case err == nil:
			continue
		case !pulsarx.IsNotFound(err):
			return fmt.Errorf("reading function %s: %w", st.FullName(), err)
		}
		if err := tableOf(st); err != nil { // its view's, or its states'
			return err
		}
		fmt.Fprintf(opts.ErrOut, "creating function %s (reads %v)\n", st.FullName(), st.Inputs)
		conf := f.Config
		err = uploadPinned(f.Binary, func(path string) error { return pulsar.Functions.CreateFuncWithContext(ctx, &conf, path) })
		if err != nil {
			return fmt.Errorf("creating function %s: %w", st.FullName(), err)
		}
		created = true
	}
	if opts.Wait > 0 {
		return waitRunning(ctx, pulsar, &Plan{functions: functions}, opts.Wait, opts.ErrOut, created)
	}
	return nil
}

// createTables creates the tables of the sinks among stages, one after the
// other, in the background: while the binaries are built and the functions
// upstream of each sink are created, so that neither the first stage nor a
// sink waits for all of them. A table took Cassandra 2-3 s here once a
// backfill's first stage ran on both cores, and 0.5 s before. tableOf
// waits for the table of a sink stage (nil at once for other stages) and
// returns the error creating it; stop ends the creation and waits for it.
func createTables(ctx context.Context, cql *gocql.Session, set *manifest.Set, stages []*manifest.Stage) (tableOf func(*manifest.Stage) error, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	type table struct {
		st   *manifest.Stage
		done chan struct{} // closed once err is set
		err  error
	}
	var tables []*table
	byStage := map[string]*table{}
	for _, st := range stages {
		if st.View != nil || st.Stateful {
			t := &table{st: st, done: make(chan struct{})}
			tables = append(tables, t)
			byStage[st.FullName()] = t
		}
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for _, t := range tables {
			if t.st.Stateful {
				ks, table := set.Tenant.Keyspace, cqlstate.TableName(t.st.Name)
				if err := cqlstate.Ensure(ctx, cql, ks, table); err != nil {
					t.err = fmt.Errorf("creating state table %s.%s of function %s: %w", ks, table, t.st.Name, err)
				}
				close(t.done)
				continue
			}
			schema := t.st.View.Schema()
			if err := cassandra.EnsureSchema(ctx, cql, schema, cassandra.Replication(set.Tenant.Replication)); err != nil {
				t.err = fmt.Errorf("creating table %s.%s of view %s: %w", schema.Keyspace, schema.Table, t.st.View.Name, err)
			}
			close(t.done)
		}
	}()
	tableOf = func(st *manifest.Stage) error {
		t, ok := byStage[st.FullName()]
		if !ok {
			return nil
		}
		select {
		case <-t.done:
			return t.err
		case <-ctx.Done():
			return fmt.Errorf("creating the table of %s: %w", st.Name, ctx.Err())
		}
	}
	return tableOf, func() { cancel(); <-finished }
}

// stageEpochs returns the epochs of the ledger topics that stages read,
// giving a topic one if it has none (package ledgerepoch).
func stageEpochs(ctx context.Context, pulsar *pulsarx.Clients, set *manifest.Set, stages []*manifest.Stage) (map[string]string, error) {
	ledger := map[string]bool{}
	for _, t := range set.Tenant.Ledger {
		ledger[t.Name] = true
	}
	epochs := map[string]string{}
	for _, st := range stages {
		for _, in := range st.Inputs {
			if !ledger[in] || epochs[in] != "" {
				continue
			}
			tn, err := utils.GetTopicName(in)
			if err != nil {
				return nil, fmt.Errorf("naming topic %s: %w", in, err)
			}
			if epochs[in], err = ledgerepoch.Ensure(ctx, pulsar.Admin.Topics(), *tn); err != nil {
				return nil, err
			}
		}
	}
	return epochs, nil
}

// createTopic creates a topic with partitions (0: not partitioned) unless
// it exists ("" is no topic).
func createTopic(ctx context.Context, pulsar *pulsarx.Clients, topic string, partitions int) error {
	if topic == "" {
		return nil
	}
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		return fmt.Errorf("naming topic %s: %w", topic, err)
	}
	if err := pulsar.Admin.Topics().CreateWithContext(ctx, *tn, partitions); err != nil && !pulsarx.IsConflict(err) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return nil
}

// DeleteStages deletes the functions of stages downstream first, and their
// subscriptions, announcing each removal on progress; it returns what it
// removed. Stages already gone are skipped, and a stage listed twice is
// deleted once.
func DeleteStages(ctx context.Context, pulsar *pulsarx.Clients, stages []*manifest.Stage, progress io.Writer) ([]string, error) {
	var removed []string
	note := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Fprintln(progress, line)
		removed = append(removed, line)
	}
	for _, st := range downstreamFirst(stages) {
		err := pulsar.Functions.DeleteFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name)
		deleted := err == nil
		switch {
		case pulsarx.IsNotFound(err):
		case err != nil:
			return removed, fmt.Errorf("deleting function %s: %w", st.FullName(), err)
		default:
			note("deleted function %s", st.FullName())
		}
		n, err := deletePackages(ctx, pulsar, st)
		if err != nil {
			return removed, err
		}
		if n > 0 {
			note("deleted %d stored package version(s) of %s", n, st.FullName())
		}
		for _, in := range st.Inputs {
			gone, how, err := deleteSubscription(ctx, pulsar, in, st.SubName, deleted)
			if err != nil {
				return removed, err
			}
			if gone {
				note("deleted subscription %s on %s%s", st.SubName, in, how)
			}
		}
	}
	return removed, nil
}

// downstreamFirst returns stages in reverse order, each (by full name)
// once, where it last appears in stages.
func downstreamFirst(stages []*manifest.Stage) []*manifest.Stage {
	out := make([]*manifest.Stage, 0, len(stages))
	seen := make(map[string]bool, len(stages))
	for _, st := range slices.Backward(stages) {
		if !seen[st.FullName()] {
			seen[st.FullName()] = true
			out = append(out, st)
		}
	}
	return out
}

// deletePackages deletes what the worker stored of a stage's function in the
// package management service, every version of function://<full name>, and
// returns how many versions it deleted. The worker leaves it behind when
// the function is deleted, and then refuses to create a function of that
// name again ("Package … metadata already exists"): a backfill into a
// table version reused after an abort, or a replay after its snapshot was
// dropped, would fail. A cluster without
// package management (503) stores nothing.
func deletePackages(ctx context.Context, pulsar *pulsarx.Clients, st *manifest.Stage) (int, error) {
	url := "function://" + st.FullName()
	versions, err := pulsar.Packages.ListVersionsWithContext(ctx, url)
	switch {
	case pulsarx.IsNotFound(err), pulsarx.StatusCode(err) == http.StatusServiceUnavailable:
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("listing the stored packages of %s: %w", st.FullName(), err)
	}
	deleted := 0
	for _, v := range versions {
		err := pulsar.Packages.DeleteWithContext(ctx, url+"@"+v)
		switch {
		case err == nil:
			deleted++
		case pulsarx.IsNotFound(err):
		default:
			// The store keeps listing a version after deleting it, with
			// no metadata, and then fails to delete it again (500); an
			// upload cut short (a create killed midway) leaves the same.
			// Such a version blocks nothing: it is as good as gone.
			if _, merr := pulsar.Packages.GetMetadataWithContext(ctx, url+"@"+v); !pulsarx.IsNotFound(merr) {
				return 0, fmt.Errorf("deleting stored package %s@%s: %w", url, v, err)
			}
		}
	}
	return deleted, nil
}

// DropStateTables drops the state tables (cqlstate) in keyspace of the
// function stages among stages whose functions and subscriptions are
// gone (DeleteStages): a state table lives as long as its function's
// subscription, since a function deployed again reads its input from the
// first message and folds every state anew. A stage known by name only
// (a backfill record's) counts as stateful when its table exists. It
// returns what it dropped.
func DropStateTables(ctx context.Context, cql *gocql.Session, keyspace string, stages []*manifest.Stage, progress io.Writer) ([]string, error) {
	existing := map[string]bool{}
	iter := cql.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, keyspace).WithContext(ctx).Iter()
	for name := ""; iter.Scan(&name); {
		existing[name] = true
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("listing the tables of keyspace %s: %w", keyspace, err)
	}
	var dropped []string
	for _, st := range stages {
		table := cqlstate.TableName(st.Name)
		if st.Kind != manifest.StageFunction || !existing[table] {
			continue
		}
		delete(existing, table)
		if err := cql.Query(`DROP TABLE IF EXISTS ` + cqlname.Table(keyspace, table)).WithContext(ctx).Exec(); err != nil {
			return dropped, fmt.Errorf("dropping state table %s.%s of %s: %w", keyspace, table, st.FullName(), err)
		}
		line := fmt.Sprintf("dropped state table %s.%s of %s", keyspace, table, st.FullName())
		fmt.Fprintln(progress, line)
		dropped = append(dropped, line)
	}
	return dropped, nil
}

// DeleteTopics deletes topics (forcefully: their functions are gone),
// skipping those already gone.
func DeleteTopics(ctx context.Context, pulsar *pulsarx.Clients, topics []string) error {
	for _, topic := range topics {
		tn, err := utils.GetTopicName(topic)
		if err != nil {
			return fmt.Errorf("naming topic %s: %w", topic, err)
		}
		if err := pulsar.Admin.Topics().DeleteWithContext(ctx, *tn, true, true); err != nil && !pulsarx.IsNotFound(err) {
			return fmt.Errorf("deleting topic %s: %w", topic, err)
		}
	}
	return nil
}
