package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/foldline/foldline/functions/dedup"
)

// StageKind tells a pipeline function from a view's sink.
type StageKind string

// The kinds of stage.
const (
	StageFunction StageKind = "function"
	StageSink     StageKind = "sink"
)

// Stage is one deployable function of the DAG: a pipeline function or a
// view's sink. Both are Go Pulsar Functions; the sink is derived from its
// view.
type Stage struct {
	Kind      StageKind
	Name      string
	Tenant    string
	Namespace string
	Inputs    []string
	// Output is the topic the stage writes, "" for a sink.
	Output string
	// OutputPartitions is the partitions the manifests declare for Output
	// (0: not partitioned); a backfill's copy of Output gets as many.
	OutputPartitions int
	// RouteByOrigin is set on a function whose partitioned output another
	// function reads: deploy has the runtime send each record to the
	// partition of its ledger origin (user config outputRouting origin),
	// so that each partition of every topic downstream holds one ledger
	// partition's events in ledger order.
	RouteByOrigin bool
	SubName       string
	Binary        string
	Parallelism   int
	// Stateful is set on a stateful function (FunctionRef.Stateful): it
	// keeps its keys' states in the table StateTable names.
	Stateful bool
	// Function is set for a pipeline function, View for a sink.
	Function *Function
	View     *View
}

// Binaries returns the packages of stages' binaries, each once, in order.
func Binaries(stages []*Stage) []string {
	pkgs := make([]string, 0, len(stages))
	for _, st := range stages {
		if !slices.Contains(pkgs, st.Binary) {
			pkgs = append(pkgs, st.Binary)
		}
	}
	return pkgs
}

// FullName is tenant/namespace/name, as Pulsar names a function.
func (s *Stage) FullName() string { return s.Tenant + "/" + s.Namespace + "/" + s.Name }

// BinaryProblem is a problem located at the manifest field that names the
// stage's binary (a pipeline's functions[i].binary, a view's sink.binary).
func (s *Stage) BinaryProblem(format string, args ...any) Problem {
	if s.Function != nil {
		return s.Function.Ref.Problem(s.Function.RefField+".binary", format, args...)
	}
	return s.View.Problem("sink.binary", format, args...)
}

// DeadLetterTopic is the stage's dead-letter topic, "" when it has none.
func (s *Stage) DeadLetterTopic() string {
	dlt, _ := s.userConfig()[UserConfigDeadLetterTopic].(string)
	return dlt
}

// source and field locate the stage's declaration of a field for problems.
func (s *Stage) problem(field, format string, args ...any) Problem {
	if s.Function != nil {
		return s.Function.Source.Problem(field, format, args...)
	}
	return s.View.Problem("sink."+field, format, args...)
}

// Stages returns the pipeline functions, then the sinks, in manifest order.
func (s *Set) Stages() []*Stage {
	var stages []*Stage
	partitions := s.Partitions()
	for _, f := range s.Functions {
		c := f.Config
		stages = append(stages, &Stage{
			Kind: StageFunction, Name: c.Name, Tenant: c.Tenant, Namespace: c.Namespace,
			Inputs: c.Inputs, Output: c.Output, OutputPartitions: partitions[c.Output], SubName: c.SubName, Binary: f.Binary,
			Parallelism: c.Parallelism, Stateful: f.Stateful, Function: f,
		})
	}
	for _, v := range s.Views {
		tenant := ""
		if s.Tenant != nil {
			tenant = s.Tenant.Name
		}
		stages = append(stages, &Stage{
			Kind: StageSink, Name: v.Sink.Name, Tenant: tenant, Namespace: v.Sink.Namespace,
			Inputs: []string{v.Sink.Input}, SubName: v.Sink.SubName, Binary: v.Sink.Binary,
			Parallelism: v.Sink.Parallelism, View: v,
		})
	}
	return stages
}

// Partitions maps each topic the manifests declare partitioned (ledger
// topics in the tenant manifest, pipeline topics under a pipeline's
// topics) to its number of partitions.
func (s *Set) Partitions() map[string]int {
	out := map[string]int{}
	if s.Tenant != nil {
		for _, t := range s.Tenant.Ledger {
			if t.Partitions > 0 {
				out[t.Name] = t.Partitions
			}
		}
	}
	for _, p := range s.Pipelines {
		for _, t := range p.Topics {
			if t.Partitions > 0 {
				out[t.Name] = t.Partitions
			}
		}
	}
	return out
}

// Graph is the DAG of stages linked by topics.
type Graph struct {
	// Order lists every stage upstream first: a stage comes after every
	// stage that writes one of its inputs. Ties keep manifest order.
	Order []*Stage
	// Writers maps a topic to the stages that write it.
	Writers map[string][]*Stage
	// Ledger holds the ledger topics (written by ingest).
	Ledger map[string]bool
	// Partitions maps each partitioned topic to its partitions (Set.Partitions).
	Partitions map[string]int
}

// Upstream returns the stages that write s's inputs.
func (g *Graph) Upstream(s *Stage) []*Stage {
	var up []*Stage
	for _, in := range s.Inputs {
		up = append(up, g.Writers[in]...)
	}
	return up
}

// Topics returns every topic the DAG touches (ledger, inputs, outputs,
// dead-letter topics), sorted.
func (g *Graph) Topics() []string {
	seen := map[string]bool{}
	for t := range g.Ledger {
		seen[t] = true
	}
	for _, s := range g.Order {
		for _, in := range s.Inputs {
			seen[in] = true
		}
		if s.Output != "" {
			seen[s.Output] = true
		}
		if dlt := s.DeadLetterTopic(); dlt != "" {
			seen[dlt] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Graph links the stages and checks the DAG: every input is written by a
// stage or is a ledger topic, no stage writes the ledger, a view has one
// writer, and there is no cycle.
func (s *Set) Graph() (*Graph, Problems) {
	stages := s.Stages()
	g := &Graph{Writers: map[string][]*Stage{}, Ledger: map[string]bool{}, Partitions: s.Partitions()}
	if s.Tenant != nil {
		for _, t := range s.Tenant.Ledger {
			g.Ledger[t.Name] = true
		}
	}
	var ps Problems
	for _, st := range stages {
		if st.Output == "" {
			continue
		}
		if g.Ledger[st.Output] {
			ps = append(ps, st.problem("output", "%s is a ledger topic: only ingest writes the ledger", st.Output))
		}
		g.Writers[st.Output] = append(g.Writers[st.Output], st)
	}
	for _, st := range stages {
		for i, in := range st.Inputs {
			if g.Ledger[in] || len(g.Writers[in]) > 0 {
				continue
			}
			field := fmt.Sprintf("inputs[%d]", i)
			if st.Kind == StageSink {
				field = "input"
			}
			ps = append(ps, st.problem(field, "nothing writes %s: no function has it as output, and the tenant manifest does not declare it as a ledger topic", in))
		}
		if st.Kind == StageSink {
			if writers := g.Writers[st.Inputs[0]]; len(writers) > 1 {
				names := make([]string, len(writers))
				for i, w := range writers {
					names[i] = w.Name
				}
				ps = append(ps, st.problem("input", "view %s has %d writers (%s): one function must own a view's operations", st.View.Name, len(writers), strings.Join(names, ", ")))
			}
		}
	}
	routeByOrigin(stages)
	ps = append(ps, g.orderingProblems(stages)...)
	ps = append(ps, s.eventIDProblems(stages, g)...)
	order, cycle := topologicalOrder(stages, g)
	g.Order = order
	if cycle != nil {
		names := make([]string, len(cycle))
		for i, st := range cycle {
			names[i] = st.Name
		}
		ps = append(ps, cycle[0].problem("inputs", "cycle: %s", strings.Join(append(names, names[0]), " → ")))
	} else {
		ps = append(ps, g.diamondProblems()...)
	}
	return g, ps
}

// diamondProblems reports every stage that one ledger event reaches by two
// routes (a diamond: validate → purchases → summary and validate → summary),
// where the routes meet: at a stage with two inputs that both carry the
// ledger topic's events, or at an input written by two functions that both
// do. Every output of an event carries the event's origin position, so
// the second copy to reach a view's row has the position of one already
// applied, and the sink drops it as a redelivery: the view loses one of the
// two routes' operations. A stage downstream of the meeting point inherits
// the duplicates and is not reported again. It needs g.Order complete (no
// cycle).
func (g *Graph) diamondProblems() Problems {
	// routes[topic][ledger] counts the routes by which one event of ledger
	// reaches topic: 1 for the ledger itself, the sum over its writers'
	// inputs for another.
	routes := map[string]map[string]int{}
	for l := range g.Ledger {
		routes[l] = map[string]int{l: 1}
	}
	carried := func(topic string) map[string]int {
		if r, ok := routes[topic]; ok {
			return r
		}
		return map[string]int{}
	}
	var ps Problems
	for _, st := range g.Order {
		in := map[string]int{}
		for _, topic := range st.Inputs {
			for l, n := range carried(topic) {
				in[l] += n
			}
		}
		for _, l := range slices.Sorted(maps.Keys(in)) {
			if in[l] < 2 {
				continue
			}
			if p, ok := g.diamondAt(st, l, carried); ok {
				ps = append(ps, p)
			}
		}
		if st.Output == "" {
			continue
		}
		out := routes[st.Output]
		if out == nil {
			out = map[string]int{}
			routes[st.Output] = out
		}
		for l, n := range in {
			out[l] += n
		}
	}
	return ps
}

// diamondAt describes the meeting at st of two routes of ledger's events,
// if they meet there: two of its inputs carry them, or one input written by
// two stages that both carry them. ok is false when st only inherits a
// meeting upstream.
func (g *Graph) diamondAt(st *Stage, ledger string, carried func(string) map[string]int) (Problem, bool) {
	var carrying []int
	for i, topic := range st.Inputs {
		if carried(topic)[ledger] > 0 {
			carrying = append(carrying, i)
		}
	}
	const why = "each output of an event carries the event's origin position, so the second to reach a view's row looks like a redelivery of the first and the sink drops it: the view loses one route's operations. Join the routes in one function upstream (one input per event), or read the ledger once"
	field := func(i int) string {
		if st.Kind == StageSink {
			return "input"
		}
		return fmt.Sprintf("inputs[%d]", i)
	}
	if len(carrying) >= 2 {
		i, j := carrying[0], carrying[1]
		return st.problem(field(j), "diamond: one event of %s reaches %s by two inputs, %s (%s) and %s (%s); %s",
			ledger, st.Name, st.Inputs[i], g.route(st.Inputs[i]), st.Inputs[j], g.route(st.Inputs[j]), why), true
	}
	if len(carrying) == 1 && st.Kind == StageFunction { // a sink's two writers are a problem of their own
		i := carrying[0]
		var writers []string
		for _, w := range g.Writers[st.Inputs[i]] {
			for _, topic := range w.Inputs {
				if carried(topic)[ledger] > 0 {
					writers = append(writers, w.Name)
					break
				}
			}
		}
		if len(writers) >= 2 {
			return st.problem(field(i), "diamond: one event of %s reaches %s twice through %s, which %s all write from it; %s",
				ledger, st.Name, st.Inputs[i], strings.Join(writers, ", "), why), true
		}
	}
	return Problem{}, false
}

// route says where a topic's events come from: the ledger, or the stages
// that write it.
func (g *Graph) route(topic string) string {
	if g.Ledger[topic] {
		return "the ledger"
	}
	names := make([]string, 0, len(g.Writers[topic]))
	for _, w := range g.Writers[topic] {
		names = append(names, "written by "+w.Name)
	}
	return strings.Join(names, ", ")
}

// subscriptionType is the subscription the runtime takes for the stage:
// userConfig subscriptionType when set, else failover with retainOrdering,
// else shared.
func (s *Stage) subscriptionType() string {
	uc := s.userConfig()
	if t, ok := uc[UserConfigSubscriptionType].(string); ok {
		return t
	}
	if s.Function != nil && s.Function.Config.RetainOrdering {
		return "failover"
	}
	return "shared"
}

// userConfig is the stage's user config as the manifests give it; nil for
// a stage known only by name (a backfill record's, see backfillrecord).
func (s *Stage) userConfig() map[string]any {
	switch {
	case s.Function != nil:
		return s.Function.Config.UserConfig
	case s.View != nil:
		return s.View.Sink.UserConfig
	}
	return nil
}

// batchesByKey reports whether the stage's producer batches by key
// (producerConfig.batchBuilder KEY_BASED).
func (s *Stage) batchesByKey() bool {
	if s.Function == nil {
		return false
	}
	pc := s.Function.Config.ProducerConfig
	return pc != nil && pc.BatchBuilder == "KEY_BASED"
}

// orderingProblems reports layouts that would break the sink's
// exactly-once effect. The sink applies an operation only if its origin is
// past the last one applied to the row from the same ledger partition, so
// every row must receive each ledger partition's operations in ledger
// order. A row of a view keyed like the ledger needs only each key's
// order; a re-keyed row (the shop's product_sales, by SKU) gathers the
// events of many ledger keys and needs the whole partition's order,
// through every function upstream — which lint cannot tell apart, since it
// does not know which functions re-key. Hence:
//   - a function runs several instances only on a failover subscription of
//     partitioned inputs: each partition then has one active instance,
//     which sees it in order (several instances of one partition would
//     interleave its keys). Its output, when another function reads it, is
//     routed by origin (RouteByOrigin), so the next stage's partitions
//     keep the same split; a view-operation topic is routed by row key;
//   - a function batches by key (producerConfig.batchBuilder KEY_BASED)
//     only when nothing but sinks reads its output: the key-based batcher
//     sends each key's batch on its own and so reorders keys;
//   - a sink may run several instances, each row being one message key, on
//     a key_shared subscription whose input's writers batch by key (Pulsar
//     hands a batch whole to the instance of its first message's key, and
//     holds a key moved to a joining instance back until the messages the
//     previous one got are acknowledged), with the row cache off (row_cache
//     0: another instance may have written the row since). Not on a
//     failover subscription: it moves a partition to a joining instance at
//     once, while the previous one still applies what it had received.
func (g *Graph) orderingProblems(stages []*Stage) Problems {
	var ps Problems
	readers := map[string][]*Stage{}
	for _, st := range stages {
		for _, in := range st.Inputs {
			readers[in] = append(readers[in], st)
		}
	}
	for _, st := range stages {
		if st.Kind == StageFunction {
			ps = append(ps, g.functionParallelismProblems(st)...)
			if routing, _ := st.userConfig()[UserConfigOutputRouting].(string); st.RouteByOrigin && routing != "" && !strings.EqualFold(routing, "origin") {
				ps = append(ps, st.problem("userConfig."+UserConfigOutputRouting, "%q: function %s reads the partitioned %s, whose partitions must each hold one ledger partition's events: remove the key (deploy sets origin)", routing, readers[st.Output][0].Name, st.Output))
			}
			if st.batchesByKey() {
				for _, r := range readers[st.Output] {
					if r.Kind == StageFunction {
						ps = append(ps, st.problem("producerConfig.batchBuilder", "KEY_BASED sends each key's batch on its own, out of ledger order, and function %s reads %s: only a function whose output nothing but sinks reads may batch by key", r.Name, st.Output))
						break
					}
				}
			}
			continue
		}
		if st.Parallelism <= 1 {
			continue
		}
		switch st.subscriptionType() {
		case "failover":
			// A failover subscription hands a partition to an instance
			// that joins while the one before still applies what it had
			// received: two writers of a row, each folding from what it
			// read, and one of them loses the other's operations.
			ps = append(ps, st.problem("parallelism", "%d instances on a failover subscription: when an instance (re)joins, Pulsar moves a partition to it while the previous instance still applies the operations it had received, so two instances write one row and one loses the other's operations; set userConfig.%s key_shared (Pulsar holds a moved key back until its earlier messages are acknowledged), or run 1 instance", st.Parallelism, UserConfigSubscriptionType))
			continue
		case "key_shared":
			for _, w := range g.Writers[st.Inputs[0]] {
				if !w.batchesByKey() {
					ps = append(ps, w.problem("producerConfig.batchBuilder", "view %s's sink runs %d instances on a key_shared subscription of %s, which this function writes: set KEY_BASED, or Pulsar hands a batch of many rows whole to one instance and a row's operations are applied out of order", st.View.Name, st.Parallelism, st.Inputs[0]))
				}
			}
		default:
			ps = append(ps, st.problem("parallelism", "%d instances on a %s subscription apply a row's operations out of order: set userConfig.%s key_shared or failover, or run 1 instance", st.Parallelism, st.subscriptionType(), UserConfigSubscriptionType))
			continue
		}
		if rc, ok := st.userConfig()["row_cache"]; !ok || rc != 0 {
			ps = append(ps, st.problem("userConfig.row_cache", "view %s's sink runs %d instances: set 0, a cached row may be stale once another instance wrote it", st.View.Name, st.Parallelism))
		}
	}
	return ps
}

// eventIDProblems reports what would let an event through twice, or stop
// ingestion, for a tenant that names its events' id field (Tenant.EventID):
// the only reader of each ledger topic is the event-id deduplication,
// whose id field is the tenant's; and a deduplication stage of a tenant
// that names none.
func (s *Set) eventIDProblems(stages []*Stage, g *Graph) Problems {
	var ps Problems
	eventID := ""
	if s.Tenant != nil {
		eventID = s.Tenant.EventID
	}
	for _, st := range stages {
		if st.Function == nil {
			continue
		}
		isDedup := st.Binary == DedupBinary
		if isDedup {
			field, set := st.userConfig()[dedup.UserConfigIDField]
			switch {
			case eventID == "":
				ps = append(ps, st.Function.Ref.Problem(st.Function.RefField+".binary", "the event-id deduplication needs the events' id field: name it in the tenant manifest (eventId)"))
			case set && field != eventID:
				ps = append(ps, st.problem("userConfig."+dedup.UserConfigIDField, "%v: deploy sets the tenant's eventId, %q: remove it", field, eventID))
			}
			if v, set := st.userConfig()[dedup.UserConfigIDBuckets]; set {
				if _, err := dedup.ParseBuckets(v); err != nil {
					ps = append(ps, st.problem("userConfig."+dedup.UserConfigIDBuckets, "%v", err))
				}
			}
		}
		if eventID == "" || isDedup {
			continue
		}
		for i, in := range st.Inputs {
			if g.Ledger[in] {
				ps = append(ps, st.problem(fmt.Sprintf("inputs[%d]", i), "%s is the ledger of a tenant whose events have ids (eventId %s): only the event-id deduplication (%s, stateful) reads it, so that no event counts twice; read its output instead", in, eventID, DedupBinary))
			}
		}
	}
	return ps
}

// routeByOrigin sets RouteByOrigin on every function whose partitioned
// output another function reads.
func routeByOrigin(stages []*Stage) {
	readByFunction := map[string]bool{}
	for _, st := range stages {
		if st.Kind == StageFunction {
			for _, in := range st.Inputs {
				readByFunction[in] = true
			}
		}
	}
	for _, st := range stages {
		st.RouteByOrigin = st.Kind == StageFunction && st.OutputPartitions > 0 && readByFunction[st.Output]
	}
}

// functionParallelismProblems reports a function that runs several
// instances where they would interleave a ledger partition's events: on
// any subscription but failover, or on an input that is not partitioned
// (failover makes one instance active per partition, and a topic that is
// not partitioned is one partition).
func (g *Graph) functionParallelismProblems(st *Stage) Problems {
	if st.Parallelism <= 1 {
		return nil
	}
	if t := st.subscriptionType(); t != "failover" {
		return Problems{st.problem("parallelism", "%d instances on a %s subscription interleave a ledger partition's keys, and a view re-keyed downstream (a row fed by many ledger keys) then gets its operations out of order, which the sink's exactly-once check drops: set userConfig.%s failover on partitioned inputs, or run 1 instance", st.Parallelism, t, UserConfigSubscriptionType)}
	}
	var ps Problems
	for i, in := range st.Inputs {
		n := g.Partitions[in]
		switch {
		case n == 0:
			where := "declare it with partitions under the pipeline's topics"
			if g.Ledger[in] {
				where = "give it partitions in the tenant manifest's ledger"
			}
			ps = append(ps, st.problem(fmt.Sprintf("inputs[%d]", i), "%s is not partitioned, so only 1 of the %d instances would ever be active on its failover subscription: %s, or run 1 instance", in, st.Parallelism, where))
		case st.Parallelism > n:
			ps = append(ps, st.problem("parallelism", "%d instances for the %d partitions of %s: the extra instances would only stand by; run at most %d", st.Parallelism, n, in, n))
		}
	}
	return ps
}

// topologicalOrder sorts stages upstream first (Kahn's algorithm, stable
// on manifest order). When a cycle remains, it returns one of its paths.
func topologicalOrder(stages []*Stage, g *Graph) ([]*Stage, []*Stage) {
	pending := map[*Stage]int{}
	for _, st := range stages {
		pending[st] = len(g.Upstream(st))
	}
	var order []*Stage
	placed := map[*Stage]bool{}
	for len(order) < len(stages) {
		progressed := false
		for _, st := range stages {
			if placed[st] || pending[st] > 0 {
				continue
			}
			placed[st] = true
			order = append(order, st)
			progressed = true
			for _, down := range stages {
				for _, up := range g.Upstream(down) {
					if up == st {
						pending[down]--
					}
				}
			}
		}
		if !progressed {
			return order, findCycle(stages, placed, g)
		}
	}
	return order, nil
}

// findCycle walks upstream from an unplaced stage until a stage repeats.
func findCycle(stages []*Stage, placed map[*Stage]bool, g *Graph) []*Stage {
	var start *Stage
	for _, st := range stages {
		if !placed[st] {
			start = st
			break
		}
	}
	var path []*Stage
	index := map[*Stage]int{}
	for st := start; st != nil; {
		if i, seen := index[st]; seen {
			cycle := slices.Clone(path[i:])
			slices.Reverse(cycle) // downstream-first walk, shown upstream first
			return cycle
		}
		index[st] = len(path)
		path = append(path, st)
		var next *Stage
		for _, up := range g.Upstream(st) {
			if !placed[up] {
				next = up
				break
			}
		}
		st = next
	}
	return path
}
