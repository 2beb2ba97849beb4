package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/ledgerepoch"
	"github.com/foldline/foldline/admin/internal/owner"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Action says what deploy does to one resource.
type Action string

// The actions of a plan.
const (
	Create Action = "create"
	Update Action = "update"
	// Replace deletes and recreates (a function whose subscription name
	// changed: Pulsar refuses to alter it).
	Replace Action = "replace"
	// Keep: the resource is as the manifests say.
	Keep Action = "keep"
	// Note: something deploy leaves alone but the user should know.
	Note Action = "note"
)

// Change is one step of a plan.
type Change struct {
	Action Action `json:"action"`
	// Kind is tenant, namespace, topic, keyspace, table, view or function.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Details say what differs, one item per field.
	Details []string `json:"details,omitempty"`

	apply func(ctx context.Context) error
}

// Plan is what deploy would do, in the order it would do it.
type Plan struct {
	// Cluster names the cluster planned against (services.Describe).
	Cluster  string   `json:"cluster"`
	Tenant   string   `json:"tenant"`
	Keyspace string   `json:"keyspace"`
	Changes  []Change `json:"changes"`
	// CodeChanges are the stages whose binary or config the manifests
	// change under a view's active table (also noted in Changes): deploy
	// refuses those it would make in place unless told --in-place.
	CodeChanges []CodeChange `json:"codeChanges,omitempty"`

	functions []desiredFunction
}

// Pending returns the changes that do something.
func (p *Plan) Pending() []Change {
	var out []Change
	for _, c := range p.Changes {
		if c.Action != Keep && c.Action != Note {
			out = append(out, c)
		}
	}
	return out
}

// Count returns how many changes have action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Summary is one line: n to create, n to update, n unchanged.
func (p *Plan) Summary() string {
	return fmt.Sprintf("%d to create, %d to update, %d to replace, %d unchanged",
		p.Count(Create), p.Count(Update), p.Count(Replace), p.Count(Keep))
}

var actionSigns = map[Action]string{Create: "+", Update: "~", Replace: "-/+", Keep: "=", Note: "!"}

// Write prints the plan readably: one line per change, details indented;
// unchanged resources only when verbose.
func (p *Plan) Write(w io.Writer, verbose bool) {
	if p.Cluster != "" {
		fmt.Fprintf(w, "cluster: %s\n", p.Cluster)
	}
	fmt.Fprintf(w, "tenant %s, keyspace %s\n", p.Tenant, p.Keyspace)
	for _, c := range p.Changes {
		if c.Action == Keep && !verbose {
			continue
		}
		fmt.Fprintf(w, "  %-3s %s %s\n", actionSigns[c.Action], c.Kind, c.Name)
		for _, d := range c.Details {
			fmt.Fprintf(w, "        %s\n", d)
		}
	}
	if len(p.Pending()) == 0 {
		fmt.Fprintf(w, "No changes: the cluster matches the manifests (%d resources).\n", p.Count(Keep))
		return
	}
	fmt.Fprintln(w, p.Summary()+".")
}

// planner compares the manifests with the cluster.
type planner struct {
	set      *manifest.Set
	graph    *manifest.Graph
	pulsar   *pulsarx.Clients
	cql      *gocql.Session
	builder  *gobuild.Builder
	hosts    string
	adminURL string
	cluster  string
	identity identity
	// kubernetesSecret, when set, names the Kubernetes secret the
	// functions' secrets refer to (Options.KubernetesSecret).
	kubernetesSecret string
	progress         io.Writer
	plan             *Plan
	// epochs maps each ledger topic to its epoch, as the topic has it or
	// will have it once the plan is applied (planTopics).
	epochs map[string]string
	// deployed holds each stage's deployed function config, by full name
	// (absent: not deployed), and stray the functions deployed in the
	// tenant's namespaces that no manifest declares, as originReaders found
	// them.
	deployed map[string]*utils.FunctionConfig
	stray    []string
	// registryExists says whether the keyspace has a view registry;
	// newActive holds the views whose first table this plan registers,
	// active (planView); views is the code of each view's active table
	// (planCodeChanges); inPlace is Options.InPlace.
	registryExists bool
	newActive      map[string]bool
	views          []viewCode
	inPlace        bool
}

func (pl *planner) add(c Change) { pl.plan.Changes = append(pl.plan.Changes, c) }

// makePlan observes the cluster and lists the changes, upstream first:
// tenant, namespaces, topics, keyspace, tables, views, functions.
func (pl *planner) makePlan(ctx context.Context) (*Plan, error) {
	t := pl.set.Tenant
	pl.plan = &Plan{Cluster: pl.cluster, Tenant: t.Name, Keyspace: t.Keyspace}
	pl.epochs = map[string]string{}
	pl.newActive = map[string]bool{}
	if err := pl.planFailoverHandover(ctx); err != nil {
		return nil, err
	}
	tenantExists, err := pl.planTenant(ctx)
	if err != nil {
		return nil, err
	}
	if err := pl.planNamespaces(ctx, tenantExists); err != nil {
		return nil, err
	}
	if err := pl.planTopics(ctx, tenantExists); err != nil {
		return nil, err
	}
	if err := pl.planKeyspace(ctx); err != nil {
		return nil, err
	}
	if err := pl.planCassandraRole(ctx); err != nil {
		return nil, err
	}
	readers, err := pl.originReaders(ctx, tenantExists)
	if err != nil {
		return nil, err
	}
	single, heldBy := singleOriginWriters(pl.graph.Order, readers)
	functions, err := renderFunctions(ctx, pl.set, pl.graph.Order, pl.builder, pl.hosts, pl.adminURL, pl.identity, pl.kubernetesSecret, pl.epochs, single)
	if err != nil {
		return nil, err
	}
	pl.plan.functions = functions
	for _, f := range functions {
		pl.planFunction(f)
		pl.noteOriginForm(f, heldBy[f.Stage.FullName()])
	}
	pl.planStrayFunctions()
	return pl.plan, nil
}

func (pl *planner) planTenant(ctx context.Context) (bool, error) {
	t := pl.set.Tenant
	clusters := t.AllowedClusters
	if len(clusters) == 0 {
		var err error
		clusters, err = pl.pulsar.Admin.Clusters().ListWithContext(ctx)
		if err != nil {
			return false, fmt.Errorf("listing Pulsar clusters: %w", err)
		}
	}
	roles := pl.identity.adminRoles(t.AdminRoles)
	want := utils.TenantData{Name: t.Name, AllowedClusters: clusters, AdminRoles: roles}
	have, err := pl.pulsar.Admin.Tenants().GetWithContext(ctx, t.Name)
	switch {
	case pulsarx.IsNotFound(err):
		pl.add(Change{Action: Create, Kind: "tenant", Name: t.Name, Details: []string{"allowed clusters " + strings.Join(clusters, ", ")},
			apply: func(ctx context.Context) error { return pl.pulsar.Admin.Tenants().CreateWithContext(ctx, want) }})
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading tenant %s: %w", t.Name, err)
	}
	var details []string
	if len(t.AllowedClusters) > 0 && !sameSet(have.AllowedClusters, t.AllowedClusters) {
		details = append(details, fmt.Sprintf("allowed clusters %v → %v", have.AllowedClusters, t.AllowedClusters))
	}
	if len(roles) > 0 && !sameSet(have.AdminRoles, roles) {
		details = append(details, fmt.Sprintf("admin roles %v → %v", have.AdminRoles, roles))
	}
	if len(details) == 0 {
		pl.add(Change{Action: Keep, Kind: "tenant", Name: t.Name})
		return true, nil
	}
	if len(t.AllowedClusters) == 0 {
		want.AllowedClusters = have.AllowedClusters
	}
	pl.add(Change{Action: Update, Kind: "tenant", Name: t.Name, Details: details,
		apply: func(ctx context.Context) error { return pl.pulsar.Admin.Tenants().UpdateWithContext(ctx, want) }})
	return true, nil
}

func (pl *planner) planNamespaces(ctx context.Context, tenantExists bool) error {
	t := pl.set.Tenant
	existing := map[string]bool{}
	if tenantExists {
		names, err := pl.pulsar.Admin.Namespaces().GetNamespacesWithContext(ctx, t.Name)
		if err != nil {
			return fmt.Errorf("listing namespaces of tenant %s: %w", t.Name, err)
		}
		for _, n := range names {
			existing[n] = true
		}
	}
	for _, ns := range t.Namespaces {
		full := t.Name + "/" + ns.Name
		var have *utils.Policies
		var inactive utils.InactiveTopicPolicies
		offloadSeconds := int64(-1) // what Pulsar answers when the namespace does not set it
		if existing[full] {
			p, err := pl.pulsar.Admin.Namespaces().GetPoliciesWithContext(ctx, full)
			if err != nil {
				return fmt.Errorf("reading policies of namespace %s: %w", full, err)
			}
			// Pulsar 4 keeps offload settings in the namespace's offload
			// policies, not in the legacy fields GetPolicies fills: ask the
			// dedicated endpoints.
			nsName, _ := utils.GetNamespaceName(full)
			if p.OffloadThreshold, err = pl.pulsar.Admin.Namespaces().GetOffloadThresholdWithContext(ctx, *nsName); err != nil {
				return fmt.Errorf("reading offload threshold of namespace %s: %w", full, err)
			}
			lag, err := pl.pulsar.Admin.Namespaces().GetOffloadDeleteLagWithContext(ctx, *nsName)
			if err != nil {
				return fmt.Errorf("reading offload deletion lag of namespace %s: %w", full, err)
			}
			p.OffloadDeletionLagMs = &lag
			if offloadSeconds, err = pl.pulsar.Admin.Namespaces().GetOffloadThresholdInSecondsWithContext(ctx, *nsName); err != nil {
				return fmt.Errorf("reading offload time threshold of namespace %s: %w", full, err)
			}
			if inactive, err = pl.pulsar.Admin.Namespaces().GetInactiveTopicPoliciesWithContext(ctx, *nsName); err != nil {
				return fmt.Errorf("reading inactive topic policy of namespace %s: %w", full, err)
			}
			have = p
		}
		steps, details := pl.namespaceSteps(full, ns, have, inactive, offloadSeconds)
		switch {
		case have == nil:
			create := func(ctx context.Context) error {
				if err := pl.pulsar.Admin.Namespaces().CreateNamespaceWithContext(ctx, full); err != nil && !pulsarx.IsConflict(err) {
					return err
				}
				return runAll(ctx, steps)
			}
			pl.add(Change{Action: Create, Kind: "namespace", Name: full, Details: details, apply: create})
		case len(steps) == 0:
			pl.add(Change{Action: Keep, Kind: "namespace", Name: full})
		default:
			pl.add(Change{Action: Update, Kind: "namespace", Name: full, Details: details,
				apply: func(ctx context.Context) error { return runAll(ctx, steps) }})
		}
	}
	return nil
}

// namespaceSteps returns the policy changes that bring have (nil for a new
// namespace) and its offload time threshold to ns, and their descriptions.
func (pl *planner) namespaceSteps(full string, ns manifest.Namespace, have *utils.Policies, inactive utils.InactiveTopicPolicies, offloadSeconds int64) ([]func(context.Context) error, []string) {
	admin := pl.pulsar.Admin.Namespaces()
	nsName, _ := utils.GetNamespaceName(full)
	var steps []func(context.Context) error
	var details []string
	if have == nil {
		// A new namespace has no offload threshold of its own (Pulsar
		// answers -1): a manifest's 0 must still be set.
		have = &utils.Policies{OffloadThreshold: -1}
	}
	var retention utils.RetentionPolicies
	if have.RetentionPolicies != nil {
		retention = *have.RetentionPolicies
	}
	want := utils.RetentionPolicies{RetentionTimeInMinutes: ns.Retention.TimeMinutes, RetentionSizeInMB: ns.Retention.SizeMB}
	if retention != want {
		details = append(details, fmt.Sprintf("retention %s → %s", describeRetention(retention), describeRetention(want)))
		steps = append(steps, func(ctx context.Context) error { return admin.SetRetentionWithContext(ctx, full, want) })
	}
	dedup := have.DeduplicationEnabled != nil && *have.DeduplicationEnabled
	if have.DeduplicationEnabled == nil || dedup != ns.Deduplication {
		details = append(details, fmt.Sprintf("deduplication %s → %s", onOff(have.DeduplicationEnabled), onOff(&ns.Deduplication)))
		steps = append(steps, func(ctx context.Context) error {
			return admin.SetDeduplicationStatusWithContext(ctx, full, ns.Deduplication)
		})
	}
	// The broker deletes topics without subscriptions or producers after a
	// while (brokerDeleteInactiveTopicsEnabled): a dead-letter topic nothing
	// has written yet would vanish, and a re-run of deploy would recreate
	// it. Foldline's namespaces keep their topics.
	if inactive.InactiveTopicDeleteMode == nil || inactive.DeleteWhileInactive {
		details = append(details, "inactive topics: kept (not deleted by the broker)")
		mode := utils.DeleteWhenNoSubscriptions
		keep := utils.InactiveTopicPolicies{InactiveTopicDeleteMode: &mode, DeleteWhileInactive: false}
		steps = append(steps, func(ctx context.Context) error {
			return admin.SetInactiveTopicPoliciesWithContext(ctx, *nsName, keep)
		})
	}
	if o := ns.Offload; o != nil {
		if have.OffloadThreshold != o.ThresholdBytes {
			details = append(details, fmt.Sprintf("offload threshold %d → %d bytes", have.OffloadThreshold, o.ThresholdBytes))
			steps = append(steps, func(ctx context.Context) error {
				return admin.SetOffloadThresholdWithContext(ctx, *nsName, o.ThresholdBytes)
			})
		}
		if o.ThresholdSeconds != nil && offloadSeconds != *o.ThresholdSeconds {
			details = append(details, fmt.Sprintf("offload time threshold %d → %d s", offloadSeconds, *o.ThresholdSeconds))
			steps = append(steps, func(ctx context.Context) error {
				return admin.SetOffloadThresholdInSecondsWithContext(ctx, *nsName, *o.ThresholdSeconds)
			})
		}
		if o.DeletionLagMs != nil && (have.OffloadDeletionLagMs == nil || *have.OffloadDeletionLagMs != *o.DeletionLagMs) {
			details = append(details, fmt.Sprintf("offload deletion lag → %d ms", *o.DeletionLagMs))
			steps = append(steps, func(ctx context.Context) error {
				return admin.SetOffloadDeleteLagWithContext(ctx, *nsName, *o.DeletionLagMs)
			})
		}
	}
	return steps, details
}

func describeRetention(r utils.RetentionPolicies) string {
	part := func(v int64, unit string) string {
		switch v {
		case -1:
			return "forever"
		case 0:
			return "none"
		}
		return fmt.Sprintf("%d %s", v, unit)
	}
	return fmt.Sprintf("time %s, size %s", part(int64(r.RetentionTimeInMinutes), "min"), part(r.RetentionSizeInMB, "MB"))
}

func onOff(b *bool) string {
	switch {
	case b == nil:
		return "unset"
	case *b:
		return "on"
	}
	return "off"
}

func (pl *planner) planTopics(ctx context.Context, tenantExists bool) error {
	partitions := map[string]int{}
	for _, t := range pl.set.Tenant.Ledger {
		partitions[t.Name] = t.Partitions
	}
	for _, p := range pl.set.Pipelines {
		for _, t := range p.Topics {
			partitions[t.Name] = t.Partitions
		}
	}
	existing := map[string]int{} // topic → partitions (0 non-partitioned)
	if tenantExists {
		for _, ns := range pl.set.Tenant.Namespaces {
			nsName, err := utils.GetNameSpaceName(pl.set.Tenant.Name, ns.Name)
			if err != nil {
				return fmt.Errorf("naming namespace %s: %w", ns.Name, err)
			}
			partitioned, plain, err := pl.pulsar.Admin.Topics().ListWithContext(ctx, *nsName)
			if err != nil && !pulsarx.IsNotFound(err) {
				return fmt.Errorf("listing topics of namespace %s: %w", nsName, err)
			}
			for _, t := range plain {
				existing[t] = 0
			}
			for _, t := range partitioned {
				existing[t] = -1 // partition count read below when needed
			}
		}
	}
	for _, topic := range pl.graph.Topics() {
		want := partitions[topic]
		have, ok := existing[topic]
		tn, err := utils.GetTopicName(topic)
		if err != nil {
			return fmt.Errorf("naming topic %s: %w", topic, err)
		}
		if !ok {
			detail := "non-partitioned"
			if want > 0 {
				detail = fmt.Sprintf("%d partitions", want)
			}
			var props map[string]string
			if pl.graph.Ledger[topic] {
				// A ledger topic is born with its epoch (package ledgerepoch).
				props = ledgerepoch.Properties(time.Now())
				pl.epochs[topic] = props[envelope.PropLedgerEpoch]
			}
			pl.add(Change{Action: Create, Kind: "topic", Name: topic, Details: []string{detail},
				apply: func(ctx context.Context) error {
					err := pl.pulsar.Admin.Topics().CreateWithPropertiesWithContext(ctx, *tn, want, props)
					if pulsarx.IsConflict(err) {
						return nil // auto-created meanwhile by a producer or consumer
					}
					return err
				}})
			continue
		}
		if pl.graph.Ledger[topic] {
			epoch, ok, err := ledgerepoch.Read(ctx, pl.pulsar.Admin.Topics(), *tn)
			if err != nil {
				return err
			}
			if !ok { // created before epochs existed, or by a producer
				epoch = ledgerepoch.New(time.Now())
				pl.add(Change{Action: Update, Kind: "topic", Name: topic, Details: []string{"ledger epoch " + epoch},
					apply: func(ctx context.Context) error {
						// Unless a function's runtime or an ingest gave it one meanwhile.
						if _, ok, err := ledgerepoch.Read(ctx, pl.pulsar.Admin.Topics(), *tn); err != nil || ok {
							return err
						}
						return ledgerepoch.Write(ctx, pl.pulsar.Admin.Topics(), *tn, epoch)
					}})
			}
			pl.epochs[topic] = epoch
		}
		if have == -1 {
			meta, err := pl.pulsar.Admin.Topics().GetMetadataWithContext(ctx, *tn)
			if err != nil {
				return fmt.Errorf("reading partitions of topic %s: %w", topic, err)
			}
			have = meta.Partitions
		}
		if have != want {
			pl.add(Change{Action: Note, Kind: "topic", Name: topic,
				Details: []string{fmt.Sprintf("has %d partitions, the manifests want %d: left alone (repartitioning a topic changes its order)", have, want)}})
			continue
		}
		pl.add(Change{Action: Keep, Kind: "topic", Name: topic})
	}
	return nil
}

func (pl *planner) planKeyspace(ctx context.Context) error {
	t := pl.set.Tenant
	ks := t.Keyspace
	var replication map[string]string
	err := pl.cql.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).WithContext(ctx).Scan(&replication)
	keyspaceExists := err == nil
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("reading keyspace %s: %w", ks, err)
	}
	tables := map[string]bool{}
	if keyspaceExists {
		iter := pl.cql.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, ks).WithContext(ctx).Iter()
		var name string
		for iter.Scan(&name) {
			tables[name] = true
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("listing tables of keyspace %s: %w", ks, err)
		}
	}
	// Refused before anything changes: another tenant's keyspace.
	recorded, err := owner.Check(ctx, pl.cql, ks, t.Name)
	if err != nil {
		return err
	}
	repl := cassandra.Replication(t.Replication)
	if !keyspaceExists {
		pl.add(Change{Action: Create, Kind: "keyspace", Name: ks, Details: []string{"replication " + fmt.Sprint(map[string]string(repl))},
			apply: func(ctx context.Context) error {
				return pl.cql.Query(cassandra.ViewSchema{Keyspace: ks}.KeyspaceCQL(repl)).WithContext(ctx).Exec()
			}})
	} else {
		pl.add(Change{Action: Keep, Kind: "keyspace", Name: ks})
	}
	if !recorded {
		pl.add(Change{Action: Create, Kind: "table", Name: ks + "." + owner.Table, Details: []string{"the keyspace's owner: tenant " + t.Name},
			apply: func(ctx context.Context) error { return owner.Claim(ctx, pl.cql, ks, t.Name) }})
	} else {
		pl.add(Change{Action: Keep, Kind: "table", Name: ks + "." + owner.Table})
	}
	pl.registryExists = tables[registry.Table]
	switch {
	case !tables[registry.Table]:
		pl.add(Change{Action: Create, Kind: "table", Name: ks + "." + registry.Table, Details: []string{"the view registry: active table of each view, and its history (" + registry.HistoryTable + ")"},
			apply: func(ctx context.Context) error { return registry.Ensure(ctx, pl.cql, ks) }})
	case !tables[registry.HistoryTable]:
		pl.add(Change{Action: Create, Kind: "table", Name: ks + "." + registry.HistoryTable, Details: []string{"the view registry's history: the code that built each table version and what changed under it"},
			apply: func(ctx context.Context) error { return registry.Ensure(ctx, pl.cql, ks) }})
	default:
		pl.add(Change{Action: Keep, Kind: "table", Name: ks + "." + registry.Table})
	}
	for _, v := range pl.set.Views {
		if err := pl.planView(ctx, v, tables[v.Table()], tables[registry.Table]); err != nil {
			return err
		}
	}
	for _, st := range pl.graph.Order {
		if !st.Stateful {
			continue
		}
		table := cqlstate.TableName(st.Name)
		if tables[table] {
			pl.add(Change{Action: Keep, Kind: "table", Name: ks + "." + table})
			continue
		}
		pl.add(Change{Action: Create, Kind: "table", Name: ks + "." + table, Details: []string{"the keyed states of function " + st.Name},
			apply: func(ctx context.Context) error { return cqlstate.Ensure(ctx, pl.cql, ks, table) }})
	}
	return nil
}

func (pl *planner) planView(ctx context.Context, v *manifest.View, tableExists, registryExists bool) error {
	schema := v.Schema()
	repl := cassandra.Replication(pl.set.Tenant.Replication)
	name := schema.Keyspace + "." + schema.Table
	ensure := func(ctx context.Context) error { return cassandra.EnsureSchema(ctx, pl.cql, schema, repl) }
	if !tableExists {
		cols := make([]string, 0, len(schema.Columns))
		for _, c := range schema.Columns {
			cols = append(cols, fmt.Sprintf("%s %s (%s)", c.Name, c.Type, c.Merge))
		}
		pl.add(Change{Action: Create, Kind: "table", Name: name, Details: []string{"columns " + strings.Join(cols, ", ")}, apply: ensure})
	} else {
		// EnsureSchema checks an existing table and changes nothing; a
		// mismatch fails the plan here rather than half-way through deploy.
		if err := ensure(ctx); err != nil {
			return fmt.Errorf("checking table %s against view %s (%s): %w", name, v.Name, v.File, err)
		}
		pl.add(Change{Action: Keep, Kind: "table", Name: name})
	}
	definition, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("encoding the definition of view %s: %w", v.Name, err)
	}
	entry := registry.Entry{View: v.Name}
	if registryExists {
		if entry, err = registry.Get(ctx, pl.cql, schema.Keyspace, v.Name); err != nil {
			return err
		}
	}
	registered := slices.ContainsFunc(entry.Versions, func(ver registry.Version) bool { return ver.Table == schema.Table })
	register := func(ctx context.Context) error {
		_, err := registry.Register(ctx, pl.cql, schema.Keyspace, v.Name, schema.Table, string(definition))
		return err
	}
	switch {
	case registered && entry.ActiveTable == schema.Table:
		pl.add(Change{Action: Keep, Kind: "view", Name: v.Name})
	case registered:
		pl.add(Change{Action: Note, Kind: "view", Name: v.Name,
			Details: []string{fmt.Sprintf("active table is %s; %s is registered but not active (a backfill switches it)", entry.ActiveTable, schema.Table)}})
	case entry.ActiveTable == "":
		pl.newActive[v.Name] = true
		pl.add(Change{Action: Create, Kind: "view", Name: v.Name, Details: []string{"active table " + schema.Table}, apply: register})
	default:
		pl.add(Change{Action: Create, Kind: "view", Name: v.Name, apply: register,
			Details: []string{fmt.Sprintf("register %s as building; %s stays active until a backfill switches it", schema.Table, entry.ActiveTable)}})
	}
	return nil
}

func (pl *planner) planFunction(f desiredFunction) {
	st := f.Stage
	fns := pl.pulsar.Functions
	create := func(ctx context.Context) error {
		conf := f.Config
		return uploadPinned(f.Binary, func(path string) error { return fns.CreateFuncWithContext(ctx, &conf, path) })
	}
	summary := fmt.Sprintf("%s, binary %s, parallelism %d, reads %s", st.Kind, short(f.Binary.SHA256), st.Parallelism, strings.Join(st.Inputs, ", "))
	have := pl.deployed[st.FullName()]
	switch {
	case have == nil:
		pl.add(Change{Action: Create, Kind: "function", Name: st.FullName(), Details: []string{summary}, apply: create})
		return
	case fmt.Sprint(have.UserConfig[UserConfigFingerprint]) == f.Config.UserConfig[UserConfigFingerprint]:
		pl.add(Change{Action: Keep, Kind: "function", Name: st.FullName()})
		return
	}
	details := configDifferences(*have, f.Config)
	if have.SubName != "" && have.SubName != f.Config.SubName {
		pl.add(Change{Action: Replace, Kind: "function", Name: st.FullName(), Details: details,
			apply: func(ctx context.Context) error {
				if err := fns.DeleteFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name); err != nil && !pulsarx.IsNotFound(err) {
					return err
				}
				return create(ctx)
			}})
		return
	}
	pl.add(Change{Action: Update, Kind: "function", Name: st.FullName(), Details: details,
		apply: func(ctx context.Context) error {
			conf := f.Config
			return uploadPinned(f.Binary, func(path string) error {
				return fns.UpdateFunctionWithContext(ctx, &conf, path, utils.NewUpdateOptions())
			})
		}})
}

// uploadPinned runs upload with the path of a private copy of bin whose
// bytes were checked against bin.SHA256, the digest the plan fingerprinted
// and showed (gobuild.Binary.Pinned): a binary changed in the cache or in
// a prebuilt folder since is refused, never uploaded.
func uploadPinned(bin gobuild.Binary, upload func(path string) error) error {
	path, remove, err := bin.Pinned()
	if err != nil {
		return err
	}
	defer remove()
	return upload(path)
}

// noteOriginForm tells, for a function that writes its origin as two
// properties only because some of its readers would not read one, which
// readers those are and what switches it.
func (pl *planner) noteOriginForm(f desiredFunction, heldBy []string) {
	if len(heldBy) == 0 || f.Config.UserConfig[pf.UserConfigOriginProperty] != "pair" {
		return
	}
	if st := f.Stage; st.Function != nil && st.Function.Config.UserConfig[pf.UserConfigOriginProperty] != nil {
		return // the manifest chose
	}
	pl.add(Change{Action: Note, Kind: "function", Name: f.Stage.FullName(), Details: []string{fmt.Sprintf(
		"writes each output's origin as two properties until every reader runs a runtime that reads one (user config %s); not yet: %s. Deploy again once they run this version",
		pf.UserConfigOriginProperty, strings.Join(heldBy, ", "))}})
}

// planStrayFunctions notes functions running in the tenant's namespaces
// that no manifest declares: deploy leaves them alone (a backfill's new
// versions run next to the live ones), destroy does not know them.
func (pl *planner) planStrayFunctions() {
	for _, full := range pl.stray {
		pl.add(Change{Action: Note, Kind: "function", Name: full, Details: []string{"runs but no manifest declares it: left alone"}})
	}
}

// configDifferences describes how a deployed config differs from the
// wanted one, field by field (only fields the wanted config sets).
func configDifferences(have, want utils.FunctionConfig) []string {
	var details []string
	if hb, wb := fmt.Sprint(have.UserConfig[UserConfigBinary]), fmt.Sprint(want.UserConfig[UserConfigBinary]); hb != wb {
		details = append(details, fmt.Sprintf("binary %s → %s", short(hb), short(wb)))
	}
	if len(have.Inputs) == 0 {
		// The worker answers with input specs rather than the inputs list.
		have.Inputs = slices.Sorted(maps.Keys(have.InputSpecs))
	}
	haveFields, wantFields := asFields(have), asFields(want)
	details = append(details, secretDifferences(have.Secrets, want.Secrets)...)
	for _, key := range slices.Sorted(maps.Keys(wantFields)) {
		if key == "userConfig" || key == "secrets" {
			continue
		}
		if !reflect.DeepEqual(haveFields[key], wantFields[key]) {
			details = append(details, fmt.Sprintf("%s %s → %s", key, compact(haveFields[key]), compact(wantFields[key])))
		}
	}
	haveUC, _ := haveFields["userConfig"].(map[string]any)
	wantUC, _ := wantFields["userConfig"].(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(wantUC)) {
		if key == UserConfigBinary || key == UserConfigFingerprint || key == UserConfigConfigDigest {
			continue
		}
		if !reflect.DeepEqual(haveUC[key], wantUC[key]) {
			details = append(details, fmt.Sprintf("userConfig.%s %s → %s", key, compact(haveUC[key]), compact(wantUC[key])))
		}
	}
	if len(details) == 0 {
		details = append(details, "deployed by another tool or version: redeploy to record the fingerprint")
	}
	return details
}

// secretDifferences names the secrets that differ between a deployed and a
// wanted config, never their values: a plan is printed, logged and kept
// in CI output, and a rotated password or token must not appear in it.
// Kubernetes secret references are redacted too: one rule for every
// secret is easier to trust than a judgement per form.
func secretDifferences(have, want map[string]any) []string {
	var details []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		old, had := have[key]
		switch {
		case !had:
			details = append(details, fmt.Sprintf("secrets.%s %s", key, secretAdded))
		case !reflect.DeepEqual(asJSONValue(old), asJSONValue(want[key])):
			details = append(details, fmt.Sprintf("secrets.%s %s", key, secretChanged))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(have)) {
		if _, kept := want[key]; !kept {
			details = append(details, fmt.Sprintf("secrets.%s %s", key, secretRemoved))
		}
	}
	return details
}

// What a plan shows of a secret that differs: never its value.
const (
	secretAdded   = "(secret added)"
	secretChanged = "(secret changed)"
	secretRemoved = "(secret removed)"
)

// asJSONValue is v as encoding/json decodes it, so that a value built in
// Go and one read from the worker compare the same.
func asJSONValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// asFields turns a config into its JSON fields, so that values compare
// the same whichever side decoded them.
func asFields(c utils.FunctionConfig) map[string]any {
	data, _ := json.Marshal(c)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

func compact(v any) string {
	if v == nil {
		return "(none)"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func runAll(ctx context.Context, steps []func(context.Context) error) error {
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}
