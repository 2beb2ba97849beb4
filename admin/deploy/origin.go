package deploy

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

// The origin form (pf.UserConfigOriginProperty) each function writes.
//
// One property ("single") costs every stage downstream a property less to
// encode and decode per message, but a reader deployed before the runtime
// knew it takes such a message for a ledger event: the origin would be the
// message's own position, and an operation delivered again across the
// upgrade would apply twice. So a function writes "single" only when every
// function that reads its output reads it too: one this deploy creates, or
// one deployed with the key set (deploy sets it on every function since
// the runtime reads both forms). Until then it writes "pair", and the next
// deploy, once its readers run the new runtime, switches it. A backfill's
// copies (CreateStages) all write "single": only copies deployed with them
// read their topics.
//
// The saving is worth the care: in a deployed backfill of the shop's
// user_activity view, one property instead of two spares the stages and
// Pulsar a tenth or more of their CPU, and user-activity a sixth or more.

// originReader is a deployed function that reads topics. A function this
// deploy creates or updates reads both forms: it holds nothing back and is
// not one.
type originReader struct {
	name   string
	inputs []string
	// anyTopic: it reads by pattern, so it may read any topic.
	anyTopic bool
	// readsSingle: it reads the single origin property.
	readsSingle bool
}

// singleOriginWriters returns the stages (by full name) whose output only
// readers of the single origin property read, and for each other stage
// that writes an output, the readers that hold it back.
func singleOriginWriters(stages []*manifest.Stage, readers []originReader) (single map[string]bool, heldBy map[string][]string) {
	single, heldBy = map[string]bool{}, map[string][]string{}
	for _, st := range stages {
		var old []string
		for _, r := range readers {
			if !r.readsSingle && (r.anyTopic || st.Output != "" && slices.Contains(r.inputs, st.Output)) {
				old = append(old, r.name)
			}
		}
		if len(old) == 0 {
			single[st.FullName()] = true
		} else {
			heldBy[st.FullName()] = old
		}
	}
	return single, heldBy
}

// deployedReader describes a deployed function as a reader.
func deployedReader(name string, conf *utils.FunctionConfig) originReader {
	r := originReader{name: name, inputs: slices.Clone(conf.Inputs), anyTopic: conf.TopicsPattern != nil && *conf.TopicsPattern != ""}
	for topic, spec := range conf.InputSpecs {
		r.inputs = append(r.inputs, topic)
		r.anyTopic = r.anyTopic || spec.RegexPattern
	}
	_, r.readsSingle = conf.UserConfig[pf.UserConfigOriginProperty]
	return r
}

// originReaders lists every function deployed in the tenant's namespaces
// as a reader: each stage as it is deployed now, and every function that
// no manifest declares. It remembers every deployed config in pl.deployed
// by full name (for planFunction, and planCodeChanges, which reads the
// code a backfill's copy runs), and the undeclared functions' names in
// pl.stray.
func (pl *planner) originReaders(ctx context.Context, tenantExists bool) ([]originReader, error) {
	pl.deployed, pl.stray = map[string]*utils.FunctionConfig{}, nil
	if !tenantExists {
		return nil, nil
	}
	var readers []originReader
	declared := map[string]bool{}
	for _, st := range pl.graph.Order {
		declared[st.FullName()] = true
		have, err := pl.pulsar.Functions.GetFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name)
		switch {
		case pulsarx.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading function %s: %w", st.FullName(), err)
		}
		pl.deployed[st.FullName()] = &have
		readers = append(readers, deployedReader(st.FullName(), &have))
	}
	for _, ns := range pl.set.Tenant.Namespaces {
		names, err := pl.pulsar.Functions.GetFunctionsWithContext(ctx, pl.set.Tenant.Name, ns.Name)
		if err != nil {
			if pulsarx.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing functions of namespace %s/%s: %w", pl.set.Tenant.Name, ns.Name, err)
		}
		for _, name := range names {
			full := pl.set.Tenant.Name + "/" + ns.Name + "/" + name
			if declared[full] {
				continue
			}
			pl.stray = append(pl.stray, full)
			have, err := pl.pulsar.Functions.GetFunctionWithContext(ctx, pl.set.Tenant.Name, ns.Name, name)
			if err != nil {
				if pulsarx.IsNotFound(err) {
					continue // deleted meanwhile
				}
				return nil, fmt.Errorf("reading function %s: %w", full, err)
			}
			pl.deployed[full] = &have
			readers = append(readers, deployedReader(full, &have))
		}
	}
	return readers, nil
}
