package manifest

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/functions/keyed/cqlstate"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Go functions get their retries and dead-letter topic from the runtime
// (functions/pf), configured through these user-config keys: the worker
// refuses maxMessageRetries for Go functions.
const (
	UserConfigDeadLetterTopic  = "deadLetterTopic"
	UserConfigMaxRetries       = "maxRetries"
	UserConfigRetryBackoffMs   = "retryBackoffMs"
	UserConfigSubscriptionType = "subscriptionType"
	// UserConfigOutputRouting is the runtime's key for the partition each
	// output goes to (pf.UserConfigOutputRouting).
	UserConfigOutputRouting = "outputRouting"
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// sinkDeployKeys are the keys of a sink's user config that deploy fills in:
// where the sink writes. A view may not set them, or its sink would write
// another Cassandra, registry or keyspace than its tenant's.
var sinkDeployKeys = []string{"hosts", "registry", "keyspace", "table", "view", "key", "columns"}

// applyDefaults is the one place where absent fields get their defaults.
func (s *Set) applyDefaults() {
	if t := s.Tenant; t != nil {
		if t.Keyspace == "" {
			t.Keyspace = KeyspaceFor(t.Name)
		}
		if t.Replication == nil {
			t.Replication = cassandra.DefaultReplication()
		}
	}
	for _, f := range s.Functions {
		c := &f.Config
		if c.Parallelism == 0 {
			c.Parallelism = 1
		}
		if c.Runtime == "" {
			c.Runtime = utils.GoRuntime
		}
		if c.ProcessingGuarantees == "" {
			c.ProcessingGuarantees = "ATLEAST_ONCE"
		}
		// Pulsar's own defaults for these are true; pulsaradmin sends every
		// bool, so a left-out one must become true here, not false.
		for field, b := range map[string]*bool{
			"autoAck":                      &c.AutoAck,
			"cleanupSubscription":          &c.CleanupSubscription,
			"forwardSourceMessageProperty": &c.ForwardSourceMessageProperty,
		} {
			if !f.Source.Has(field) {
				*b = true
			}
		}
	}
	for _, v := range s.Views {
		if v.Keyspace == "" && s.Tenant != nil {
			v.Keyspace = s.Tenant.Keyspace
		}
		for i := range v.Columns {
			if c := &v.Columns[i]; c.Merge == "" && v.From != nil {
				c.Merge = c.Aggregate.Merge() // "" for no aggregate, reported by checkDeclared
			}
		}
		if v.Version == 0 {
			v.Version = 1
		}
		sink := &v.Sink
		if sink.Binary == "" {
			sink.Binary = DefaultSinkBinary
		}
		if sink.Name == "" {
			sink.Name = v.Table() + "-sink"
		}
		if sink.Namespace == "" {
			if tn, err := utils.GetTopicName(sink.Input); err == nil {
				sink.Namespace = strings.TrimPrefix(tn.GetNamespace(), tn.GetTenant()+"/")
			}
		}
		if sink.SubName == "" {
			sink.SubName = sink.Name
		}
		if sink.Parallelism == 0 {
			sink.Parallelism = 1
		}
	}
}

// check returns every problem of the set: each document on its own, then
// the DAG as a whole.
func (s *Set) check() Problems {
	var ps Problems
	if len(s.Pipelines) == 0 && len(s.Views) == 0 && s.Tenant == nil {
		return ps
	}
	if s.Tenant == nil {
		ps = append(ps, Problem{File: s.Dir, Line: 0, Field: "kind", Message: "no Tenant manifest: add one (kind: Tenant) naming the tenant, its namespaces and ledger topics"})
	} else {
		ps = append(ps, s.checkTenant()...)
	}
	for _, p := range s.Pipelines {
		if p.Name == "" {
			ps = append(ps, p.Problem("name", "missing"))
		}
		for i, t := range p.Topics {
			ps = append(ps, s.checkTopic(p.Source, fmt.Sprintf("topics[%d].name", i), t.Name)...)
		}
	}
	for _, f := range s.Functions {
		ps = append(ps, s.checkFunction(f)...)
	}
	for _, v := range s.Views {
		ps = append(ps, s.checkView(v)...)
	}
	ps = append(ps, s.checkReplicaOverlap()...)
	ps = append(ps, s.checkNames()...)
	// The DAG is checked even when documents have problems, so that lint
	// reports everything at once; a problem already reported for the same
	// place is not repeated.
	_, dagProblems := s.Graph()
	for _, dp := range dagProblems {
		if !slices.ContainsFunc(ps, func(p Problem) bool { return p.File == dp.File && p.Line == dp.Line && p.Field == dp.Field }) {
			ps = append(ps, dp)
		}
	}
	return ps
}

func (s *Set) checkTenant() Problems {
	t := s.Tenant
	var ps Problems
	if err := CheckTenantName(t.Name); err != nil {
		ps = append(ps, t.Problem("name", "%v", err))
	} else if want := KeyspaceFor(t.Name); t.Keyspace != want {
		ps = append(ps, t.Problem("keyspace", "%q: tenant %s's keyspace is %s (its name with - as _; leave keyspace out): a keyspace is never shared between tenants", t.Keyspace, t.Name, want))
	}
	if len(t.Namespaces) == 0 {
		ps = append(ps, t.Problem("namespaces", "missing: a tenant needs at least one namespace"))
	}
	if err := t.Replication.Validate(); err != nil {
		ps = append(ps, t.Problem("replication", "%s", err.Error()))
	}
	seen := map[string]bool{}
	for i, ns := range t.Namespaces {
		field := fmt.Sprintf("namespaces[%d]", i)
		switch {
		case !namePattern.MatchString(ns.Name):
			ps = append(ps, t.Problem(field+".name", "%q: want letters, digits, '_', '-' or '.'", ns.Name))
		case seen[ns.Name]:
			ps = append(ps, t.Problem(field+".name", "namespace %s declared twice", ns.Name))
		}
		seen[ns.Name] = true
		if r := ns.Retention; r.TimeMinutes < -1 || r.SizeMB < -1 {
			ps = append(ps, t.Problem(field+".retention", "want -1 (forever) or a positive value"))
		}
		if o := ns.Offload; o != nil {
			if o.ThresholdBytes < -1 {
				ps = append(ps, t.Problem(field+".offload.thresholdBytes", "want -1 (off), 0 (at once) or a size in bytes"))
			}
			if o.ThresholdSeconds != nil && *o.ThresholdSeconds < -1 {
				ps = append(ps, t.Problem(field+".offload.thresholdSeconds", "want -1 (off), 0 (at once) or an age in seconds"))
			}
			if o.DeletionLagMs != nil && *o.DeletionLagMs < 0 {
				ps = append(ps, t.Problem(field+".offload.deletionLagMs", "want 0 (at once) or a delay in milliseconds"))
			}
		}
	}
	for i, topic := range t.Ledger {
		field := fmt.Sprintf("ledger[%d]", i)
		ps = append(ps, s.checkTopic(t.Source, field+".name", topic.Name)...)
		if topic.Partitions < 0 {
			ps = append(ps, t.Problem(field+".partitions", "want 0 (non-partitioned) or more"))
		}
	}
	return ps
}

// checkTopic checks that name is a full persistent topic name in one of the
// tenant's namespaces.
func (s *Set) checkTopic(src Source, field, name string) Problems {
	if name == "" {
		return Problems{src.Problem(field, "missing")}
	}
	tn, err := utils.GetTopicName(name)
	if err != nil || !strings.Contains(name, "://") {
		return Problems{src.Problem(field, "%q: want a full topic name, persistent://tenant/namespace/topic", name)}
	}
	if s.Tenant == nil {
		return nil
	}
	if tn.GetTenant() != s.Tenant.Name {
		return Problems{src.Problem(field, "%q is outside tenant %s", name, s.Tenant.Name)}
	}
	ns := strings.TrimPrefix(tn.GetNamespace(), tn.GetTenant()+"/")
	if !s.Tenant.hasNamespace(ns) {
		return Problems{src.Problem(field, "%q is in namespace %s, which the tenant manifest (%s) does not declare", name, ns, s.Tenant.File)}
	}
	return nil
}

func (t *Tenant) hasNamespace(name string) bool {
	for _, ns := range t.Namespaces {
		if ns.Name == name {
			return true
		}
	}
	return false
}

func (s *Set) checkFunction(f *Function) Problems {
	var ps Problems
	c := f.Config
	if f.Binary == "" {
		ps = append(ps, f.Ref.Problem(f.RefField+".binary", "missing: the Go package of the function's main, e.g. github.com/foldline/foldline/functions/shop/validate/cmd"))
	} else if err := gobuild.CheckPackage(f.Binary); err != nil {
		ps = append(ps, f.Ref.Problem(f.RefField+".binary", "%v", err))
	}
	if !namePattern.MatchString(c.Name) {
		ps = append(ps, f.Source.Problem("name", "%q: want letters, digits, '_', '-' or '.'", c.Name))
	}
	if s.Tenant != nil && c.Tenant != s.Tenant.Name {
		ps = append(ps, f.Source.Problem("tenant", "%q: want the tenant of %s, %q", c.Tenant, s.Tenant.File, s.Tenant.Name))
	}
	if s.Tenant != nil && !s.Tenant.hasNamespace(c.Namespace) {
		ps = append(ps, f.Source.Problem("namespace", "%q is not a namespace of the tenant manifest %s", c.Namespace, s.Tenant.File))
	}
	if c.Runtime != utils.GoRuntime {
		ps = append(ps, f.Source.Problem("runtime", "%q: Foldline deploys Go functions only (GO)", c.Runtime))
	}
	switch c.ProcessingGuarantees {
	case "ATLEAST_ONCE", "ATMOST_ONCE", "MANUAL":
	default:
		ps = append(ps, f.Source.Problem("processingGuarantees", "%q: want ATLEAST_ONCE, ATMOST_ONCE or MANUAL (the worker refuses EFFECTIVELY_ONCE for Go functions)", c.ProcessingGuarantees))
	}
	if c.Parallelism < 1 {
		ps = append(ps, f.Source.Problem("parallelism", "%d: want at least 1", c.Parallelism))
	}
	if c.MaxMessageRetries != nil {
		ps = append(ps, f.Source.Problem("maxMessageRetries", "the worker refuses it for Go functions: set userConfig.%s instead", UserConfigMaxRetries))
	}
	if c.DeadLetterTopic != "" {
		ps = append(ps, f.Source.Problem("deadLetterTopic", "the Go runtime takes it from userConfig.%s: move it there", UserConfigDeadLetterTopic))
	}
	if c.TopicsPattern != nil {
		ps = append(ps, f.Source.Problem("topicsPattern", "%q: list the input topics in inputs (a pattern hides the DAG from lint, and may match other tenants' topics)", *c.TopicsPattern))
	}
	if len(c.InputSpecs) > 0 {
		ps = append(ps, f.Source.Problem("inputSpecs", "list the input topics in inputs (input specs hide the DAG from lint, and may name other tenants' topics or patterns)"))
	}
	// The worker subscribes a function to the topics these maps name too:
	// each must be one of its inputs.
	for field, topics := range map[string]map[string]string{"customSchemaInputs": c.CustomSchemaInputs, "customSerdeInputs": c.CustomSerdeInputs} {
		for _, topic := range slices.Sorted(maps.Keys(topics)) {
			if more := s.checkTopic(f.Source, field, topic); len(more) > 0 {
				ps = append(ps, more...)
			} else if !slices.Contains(c.Inputs, topic) {
				ps = append(ps, f.Source.Problem(field, "%q is not one of inputs: the worker would read it too, behind lint's back", topic))
			}
		}
	}
	if c.LogTopic != "" {
		ps = append(ps, s.checkTopic(f.Source, "logTopic", c.LogTopic)...)
	}
	if len(c.Inputs) == 0 {
		ps = append(ps, f.Source.Problem("inputs", "missing: a function reads at least one topic"))
	}
	for i, in := range c.Inputs {
		ps = append(ps, s.checkTopic(f.Source, fmt.Sprintf("inputs[%d]", i), in)...)
	}
	if c.Output != "" {
		ps = append(ps, s.checkTopic(f.Source, "output", c.Output)...)
	}
	if c.SubName == "" {
		ps = append(ps, f.Source.Problem("subName", "missing: name the subscription (backfill deploys under a new one)"))
	}
	ps = append(ps, s.checkUserConfig(f.Source, "userConfig", c.UserConfig)...)
	ps = append(ps, checkMemory(f.Source, c.Resources, c.UserConfig)...)
	if f.Stateful {
		ps = append(ps, checkStateful(f)...)
	} else if f.Binary == DedupBinary {
		ps = append(ps, f.Ref.Problem(f.RefField+".stateful", "the event-id deduplication keeps the ids it has seen per key: set stateful: true"))
	}
	return ps
}

// statefulDeployKeys are the keys of a stateful function's user config
// that deploy fills in: where its states live.
var statefulDeployKeys = []string{"hosts", cqlstate.UserConfigKeyspace, cqlstate.UserConfigTable}

// checkStateful checks what a stateful function needs: its acknowledgements
// left to the runtime (which acknowledges an input only once its state
// change is saved, see package keyed), Cassandra settings the state table's
// client takes, and, with several instances, no key kept in memory once
// another instance may have taken it over.
func checkStateful(f *Function) Problems {
	var ps Problems
	c := f.Config
	if c.ProcessingGuarantees != "ATLEAST_ONCE" || !c.AutoAck {
		ps = append(ps, f.Source.Problem("processingGuarantees", "%s with autoAck %v: a stateful function needs ATLEAST_ONCE with autoAck, so that the runtime acknowledges an input only once the state change it caused is saved", c.ProcessingGuarantees, c.AutoAck))
	}
	for _, key := range statefulDeployKeys {
		if _, ok := c.UserConfig[key]; ok {
			ps = append(ps, f.Source.Problem("userConfig."+key, "set by deploy (the tenant's Cassandra, keyspace and the function's state table): remove it"))
		}
	}
	_, err := cassandra.ParseSettings(c.UserConfig)
	for _, p := range sinkProblems(err) {
		ps = append(ps, f.Source.Problem("userConfig."+p.field, "%s", p.message))
	}
	cache, set := c.UserConfig[cqlstate.UserConfigCache]
	if n, ok := cache.(int); set && (!ok || n < 0) {
		ps = append(ps, f.Source.Problem("userConfig."+cqlstate.UserConfigCache, "%v: want a whole number, 0 or more", cache))
	} else if c.Parallelism > 1 && (!set || n != 0) {
		ps = append(ps, f.Source.Problem("userConfig."+cqlstate.UserConfigCache, "a stateful function with %d instances: set 0, a key's state kept in memory may be stale once another instance took the key over and folded more of it", c.Parallelism))
	}
	return ps
}

// checkUserConfig checks the runtime's keys in a user config.
func (s *Set) checkUserConfig(src Source, field string, uc map[string]any) Problems {
	var ps Problems
	if dlt, ok := uc[UserConfigDeadLetterTopic]; ok {
		name, isString := dlt.(string)
		if !isString {
			ps = append(ps, src.Problem(field+"."+UserConfigDeadLetterTopic, "want a topic name"))
		} else {
			ps = append(ps, s.checkTopic(src, field+"."+UserConfigDeadLetterTopic, name)...)
		}
	}
	for _, key := range []string{UserConfigMaxRetries, UserConfigRetryBackoffMs} {
		if v, ok := uc[key]; ok {
			if n, isInt := v.(int); !isInt || n < 0 {
				ps = append(ps, src.Problem(field+"."+key, "want a whole number, 0 or more"))
			}
		}
	}
	if v, ok := uc[UserConfigSubscriptionType]; ok && v != "key_shared" && v != "failover" && v != "shared" {
		ps = append(ps, src.Problem(field+"."+UserConfigSubscriptionType, "%v: want key_shared, failover or shared", v))
	}
	if v, ok := uc[UserConfigOutputRouting]; ok && v != "key" && v != "origin" {
		ps = append(ps, src.Problem(field+"."+UserConfigOutputRouting, "%v: want key or origin", v))
	}
	if v, ok := uc[pf.UserConfigOriginProperty]; ok && v != "pair" && v != "single" {
		ps = append(ps, src.Problem(field+"."+pf.UserConfigOriginProperty, "%v: want pair or single", v))
	}
	if _, ok := uc[pf.UserConfigCPUProfile]; ok {
		// A file the instance creates on the worker's machine, for
		// benchmarks that start instances themselves: no manifest names one.
		ps = append(ps, src.Problem(field+"."+pf.UserConfigCPUProfile, "a profiling switch of scripts/bench-runtime, not deployable: remove it"))
	}
	ps = append(ps, checkRuntimeClientConfig(src, field, uc)...)
	if _, err := pf.ParseRuntimeSettings(uc); err != nil {
		ps = append(ps, userConfigProblems(src, field, err)...)
	}
	return ps
}

func (s *Set) checkView(v *View) Problems {
	var ps Problems
	if s.Tenant != nil && v.Keyspace != s.Tenant.Keyspace {
		ps = append(ps, v.Problem("keyspace", "%q: the tenant's views live in its keyspace %q", v.Keyspace, s.Tenant.Keyspace))
	}
	if v.Version < 1 {
		ps = append(ps, v.Problem("version", "%d: want 1 or more", v.Version))
	}
	if strings.TrimSpace(v.Description) == "" {
		ps = append(ps, v.Problem("description", "required: say what the view holds and what it is for (the view catalog shows it: foldline views describe)"))
	}
	noMerge := map[string]bool{}
	for i, c := range v.Columns {
		if c.Merge != "" {
			continue
		}
		field := fmt.Sprintf("columns[%d].merge", i)
		noMerge[field] = true
		if v.From == nil { // a declared view's merge comes from its aggregate (checkDeclared)
			ps = append(ps, v.Problem(field, "column %s has no merge rule: want set, add, max, min or latest", c.Name))
		}
	}
	ps = append(ps, s.checkDeclared(v)...)
	// The sink's own check of the table definition, located by the field
	// each message starts with.
	reported := map[sinkProblem]bool{}
	for _, p := range sinkProblems(v.Schema().Validate()) {
		p.field, p.message = v.schemaProblem(p.field, p.message)
		if noMerge[p.field] || reported[p] {
			continue // reported above in plainer words, or for an avg's other part
		}
		reported[p] = true
		switch p.field {
		case "table", "keyspace", "view":
			p.field = "name" // derived from the view's name
		}
		ps = append(ps, v.Problem(p.field, "%s", p.message))
	}
	// The sink's own parser of its settings: a setting it refuses would
	// stop the sink at start.
	_, err := cassandra.ParseSettings(v.Sink.UserConfig)
	for _, p := range sinkProblems(err) {
		ps = append(ps, v.Problem("sink.userConfig."+p.field, "%s", p.message))
	}
	if err := gobuild.CheckPackage(v.Sink.Binary); err != nil {
		ps = append(ps, v.Problem("sink.binary", "%v", err))
	}
	ps = append(ps, s.checkTopic(v.Source, "sink.input", v.Sink.Input)...)
	if s.Tenant != nil && !s.Tenant.hasNamespace(v.Sink.Namespace) {
		ps = append(ps, v.Problem("sink.namespace", "%q is not a namespace of the tenant manifest %s", v.Sink.Namespace, s.Tenant.File))
	}
	for _, key := range sinkDeployKeys {
		if _, ok := v.Sink.UserConfig[key]; ok {
			ps = append(ps, v.Problem("sink.userConfig."+key, "set by deploy (the tenant's Cassandra, registry and keyspace, the view's table): remove it"))
		}
	}
	if v.Sink.Parallelism < 1 {
		ps = append(ps, v.Problem("sink.parallelism", "%d: want at least 1", v.Sink.Parallelism))
	}
	ps = append(ps, s.checkUserConfig(v.Source, "sink.userConfig", v.Sink.UserConfig)...)
	return ps
}

// checkNames reports two functions (or sinks) with one name in a namespace,
// and two views with one name.
func (s *Set) checkNames() Problems {
	var ps Problems
	functions := map[string]string{}
	claim := func(src Source, field, namespace, name string) {
		key := namespace + "/" + name
		if first, ok := functions[key]; ok {
			ps = append(ps, src.Problem(field, "function %s is declared twice in namespace %s (first in %s)", name, namespace, first))
			return
		}
		functions[key] = src.File
	}
	for _, f := range s.Functions {
		claim(f.Source, "name", f.Config.Namespace, f.Config.Name)
	}
	views := map[string]string{}
	for _, v := range s.Views {
		claim(v.Source, "sink.name", v.Sink.Namespace, v.Sink.Name)
		if first, ok := views[v.Name]; ok {
			ps = append(ps, v.Problem("name", "view %s is declared twice (first in %s)", v.Name, first))
		}
		views[v.Name] = v.File
	}
	return ps
}

// sinkProblem is one problem the sink package found, split into the key
// its message starts with and the rest.
type sinkProblem struct{ field, message string }

// sinkProblems splits the sink's errors (errors.Join, nested) into their
// keys and messages: each message starts with the key it is about.
func sinkProblems(err error) []sinkProblem {
	var out []sinkProblem
	for _, e := range unjoin(err) {
		field, rest, _ := strings.Cut(e.Error(), " ")
		if strings.HasSuffix(field, ":") {
			field, rest = strings.TrimSuffix(field, ":"), strings.TrimSpace(rest)
		}
		out = append(out, sinkProblem{field: field, message: rest})
	}
	return out
}

// unjoin splits an errors.Join error, and the joined errors in it, into
// their parts; nil gives none.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
