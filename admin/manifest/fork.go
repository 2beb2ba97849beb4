package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/foldline/foldline/functions/pf"
)

// PathTo returns the stages on the way from the ledger to view's sink,
// upstream first (DAG order): every stage whose output the sink reads,
// directly or through other stages. An unknown view gives nil.
func (g *Graph) PathTo(view string) []*Stage {
	var sink *Stage
	for _, st := range g.Order {
		if st.View != nil && st.View.Name == view {
			sink = st
		}
	}
	if sink == nil {
		return nil
	}
	on := map[*Stage]bool{sink: true}
	queue := []*Stage{sink}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		for _, up := range g.Upstream(st) {
			if !on[up] {
				on[up] = true
				queue = append(queue, up)
			}
		}
	}
	var path []*Stage
	for _, st := range g.Order {
		if on[st] {
			path = append(path, st)
		}
	}
	return path
}

// ForkSuffix is what a backfill appends to the names of the functions,
// subscriptions and topics of its copy of a view's path: the new table's
// name, so that every version has its own and a shared stage (one that
// feeds other views too) runs once more without touching the live DAG.
func ForkSuffix(table string) string { return forkMark + table }

// forkMark starts ForkSuffix.
const forkMark = "-bf-"

// UnforkedName is the name a backfill's copy of a function copies: name
// without its ForkSuffix; a name without one is returned as it is.
func UnforkedName(name string) string {
	if i := strings.LastIndex(name, forkMark); i > 0 {
		return name[:i]
	}
	return name
}

// UnforkedTopic is UnforkedName for a topic: the manifests' topic a
// backfill's copy of a topic copies.
func UnforkedTopic(topic string) string { return UnforkedName(topic) }

// ForkPath copies path (from PathTo) for a backfill into table version
// version of its view: every function gets a new name, subscription and
// output topic (suffix ForkSuffix of the new table), inputs written by a
// forked stage follow, ledger inputs stay, and the sink writes the new
// table under the name and subscription deploy would give it. Dead-letter
// topics get the suffix too. The path's stages are left untouched.
func ForkPath(path []*Stage, version int) []*Stage {
	return ForkPathSharing(path, version, nil)
}

// ForkPathSharing is ForkPath with the stages of path that shared names
// (by name, each mapped to the output topic it is read from: its own, or a
// copy's that carries it) left out of the copy: the copy reads their
// retained outputs instead of running them again. A stage downstream of a
// copied one must be copied too; the sink always is.
func ForkPathSharing(path []*Stage, version int, shared map[string]string) []*Stage {
	var view *View
	for _, st := range path {
		if st.View != nil {
			view = st.View
		}
	}
	if view == nil {
		return nil
	}
	newView := *view
	newView.Version = version
	suffix := ForkSuffix(newView.Table())
	renamed := map[string]string{} // old output topic → new
	for _, st := range path {
		if st.Output == "" {
			continue
		}
		if from, ok := shared[st.Name]; ok {
			renamed[st.Output] = from
			continue
		}
		renamed[st.Output] = st.Output + suffix
	}
	input := func(topic string) string {
		if r, ok := renamed[topic]; ok {
			return r
		}
		return topic
	}
	forked := make([]*Stage, 0, len(path))
	for _, st := range path {
		if _, ok := shared[st.Name]; ok && st.View == nil {
			continue
		}
		c := *st
		c.Inputs = make([]string, len(st.Inputs))
		for i, in := range st.Inputs {
			c.Inputs[i] = input(in)
		}
		if st.Function != nil {
			f := *st.Function
			f.Config.Name += suffix
			f.Config.SubName = st.SubName + suffix
			f.Config.Inputs = slices.Clone(c.Inputs)
			// The worker reads these maps' topics too: they follow inputs.
			f.Config.CustomSchemaInputs = retargetKeys(f.Config.CustomSchemaInputs, input)
			f.Config.CustomSerdeInputs = retargetKeys(f.Config.CustomSerdeInputs, input)
			f.Config.Output = input(st.Output)
			f.Config.UserConfig = forkUserConfig(f.Config.UserConfig, suffix, functionCatchUp(&f))
			c.Function = &f
			c.Name, c.SubName, c.Output = f.Config.Name, f.Config.SubName, f.Config.Output
		} else {
			v := newView
			v.Sink.Input = c.Inputs[0]
			v.Sink.Name = view.Sink.Name + suffix
			if view.Sink.Name == view.Table()+"-sink" {
				v.Sink.Name = v.Table() + "-sink"
			}
			v.Sink.SubName = v.Sink.Name
			v.Sink.UserConfig = forkUserConfig(view.Sink.UserConfig, suffix, backfillSink)
			c.View = &v
			c.Name, c.SubName = v.Sink.Name, v.Sink.SubName
		}
		forked = append(forked, &c)
	}
	return forked
}

// backfillFunction is what a backfill's copy of a function reads and
// sends with, unless its config says otherwise. A catch-up reads old
// entries as fast as it can, so at the runtime's receiver queue (5000
// messages, ten of ingest's entries) its consumers ask the broker for more
// often, in small steps; 10 000 costs the broker less CPU per message and
// shortens the shop's backfill (scripts/bench), while 20 000 gains the
// broker nothing more and costs the stages larger heaps. It sends as fast
// as it reads, so its batches fill up (the runtime's defaults are 1000
// messages, 1 MiB), bigger ones cost the broker less per message, and the
// sends in flight grow with them. Those queues hold tens of megabytes, so
// the copy's memory limit (the point past which its collector runs more
// often, see pf.RuntimeSettings) is 400 MB instead of the runtime's 160,
// which spares the stages collections (1-2 µs of CPU per event); more
// gains nothing. The time a batch may wait stays the runtime's, since the
// copy serves live traffic once it has caught up.
var backfillFunction = map[string]any{
	pf.UserConfigReceiverQueueSize:   10_000,
	pf.UserConfigMaxPendingMessages:  20_000,
	pf.UserConfigBatchingMaxMessages: 5000,
	pf.UserConfigBatchingMaxSize:     1 << 20,
	pf.UserConfigMemoryLimitMB:       400,
}

// functionCatchUp is backfillFunction for f, without its memory limit
// when f's pod (resources.ram) would not hold it: the copy must pass the
// check its function passed, and keeps the live limit instead.
func functionCatchUp(f *Function) map[string]any {
	if len(checkMemory(f.Source, f.Config.Resources, backfillFunction)) == 0 {
		return backfillFunction
	}
	catchUp := maps.Clone(backfillFunction)
	delete(catchUp, pf.UserConfigMemoryLimitMB)
	return catchUp
}

// backfillSink is what a backfill's copy of a sink reads with, unless its
// config says otherwise (see backfillFunction).
var backfillSink = map[string]any{
	pf.UserConfigReceiverQueueSize: 10_000,
	pf.UserConfigMemoryLimitMB:     400,
}

// forkUserConfig returns a copy of a stage's user config for its backfill
// copy: the dead-letter topic renamed with suffix, and the keys of
// catchUp it does not set.
func forkUserConfig(uc map[string]any, suffix string, catchUp map[string]any) map[string]any {
	uc = maps.Clone(uc)
	if uc == nil {
		uc = map[string]any{}
	}
	for key, v := range catchUp {
		if _, set := uc[key]; !set {
			uc[key] = v
		}
	}
	if dlt, ok := uc[UserConfigDeadLetterTopic].(string); ok && dlt != "" {
		uc[UserConfigDeadLetterTopic] = dlt + suffix
	}
	return uc
}

// ViewByName returns the set's view named name, or an error listing the
// views there are.
func (s *Set) ViewByName(name string) (*View, error) {
	names := make([]string, 0, len(s.Views))
	for _, v := range s.Views {
		if v.Name == name {
			return v, nil
		}
		names = append(names, v.Name)
	}
	return nil, fmt.Errorf("view %s is not declared in %s (views: %v)", name, s.Dir, names)
}
