package lint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/foldline/foldline/admin/ingest"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The contract between a view's Go code and its manifest: what the code
// emits must be what the view declares. Only running the code shows what
// it emits, so lint runs each view's path locally (the engine verify and
// backfill use) over the sample events its pipeline names, and binds every
// operation with the sink's own code (cassandra.MemTable): an operation the
// sink would dead-letter at run time for a column, a merge, a key or a
// view the manifest lacks or contradicts is a problem at the manifest's
// line instead.

// sampleLimit bounds the sample events lint runs: enough to meet every
// event type, few enough to keep lint fast.
const sampleLimit = 5000

// checkContracts runs every view whose pipeline names a sample. It returns
// the problems found, and an error only when the machinery failed (a path
// that does not start is a build problem, reported elsewhere).
func checkContracts(ctx context.Context, set *manifest.Set, builder *gobuild.Builder) (manifest.Problems, error) {
	graph, problems := set.Graph()
	if len(problems) > 0 || set.Tenant == nil || len(set.Tenant.Ledger) == 0 {
		return nil, nil // the DAG's own problems come first
	}
	samples := map[string][]localrun.Message{} // by pipeline name
	var out manifest.Problems
	for _, p := range set.Pipelines {
		if p.Sample == "" {
			continue
		}
		events, err := readSample(filepath.Join(filepath.Dir(p.File), p.Sample), set.Tenant.Ledger[0].Name)
		if err != nil {
			out = append(out, p.Problem("sample", "%v", err))
			continue
		}
		samples[p.Name] = events
	}
	for _, v := range set.Views {
		path := graph.PathTo(v.Name)
		emitter := lastFunction(path)
		if emitter == nil {
			continue
		}
		events, ok := samples[emitter.Function.Pipeline]
		if !ok {
			continue
		}
		found, err := checkView(ctx, v, path, emitter, events, builder)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// lastFunction is the function of path that writes the view's operations.
func lastFunction(path []*manifest.Stage) *manifest.Stage {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Function != nil {
			return path[i]
		}
	}
	return nil
}

// readSample reads a sample file of ledger events, one JSON line each, as
// foldline ingest would publish them to ledger (key and time as ingest
// takes them; positions in file order).
func readSample(path, ledger string) ([]localrun.Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sample events: %w", err)
	}
	defer f.Close()
	var events []localrun.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	published := time.Unix(0, 0).UTC()
	for sc.Scan() && len(events) < sampleLimit {
		line := slices.Clone(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		key, at := ingest.KeyAndTime(line, ingest.DefaultKeyField, ingest.DefaultTimeField)
		events = append(events, localrun.Message{Topic: ledger, Ledger: 1, Entry: int64(len(events)),
			Key: key, Payload: line, EventTime: at, PublishTime: published.Add(time.Duration(len(events)) * time.Millisecond)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the sample events %s: %w", path, err)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("the sample events %s hold no line", path)
	}
	return events, nil
}

// checkView runs v's path over events and reports each way its operations
// disagree with v, once.
func checkView(ctx context.Context, v *manifest.View, path []*manifest.Stage, emitter *manifest.Stage, events []localrun.Message, builder *gobuild.Builder) (manifest.Problems, error) {
	table, err := cassandra.NewMemTable(v.Schema())
	if err != nil {
		return nil, nil // the schema's own problems are reported by Load
	}
	pipe, err := localrun.StartPath(ctx, path, builder, nil)
	if err != nil {
		return nil, fmt.Errorf("running the path of view %s: %w", v.Name, err)
	}
	var problems manifest.Problems
	seen := map[string]bool{}
	report := func(p manifest.Problem) {
		if k := p.String(); !seen[k] {
			seen[k] = true
			problems = append(problems, p)
		}
	}
	schema := v.Schema()
	feedErr := pipe.Feed(events, func(op cassandra.Op, _ localrun.Message) error {
		if _, err := table.Apply(op); err != nil {
			for _, p := range contractProblems(v, schema, emitter, op, err) {
				report(p)
			}
		}
		return nil
	})
	if err := errors.Join(feedErr, pipe.Close()); err != nil {
		return nil, fmt.Errorf("running the path of view %s over the sample: %w", v.Name, err)
	}
	return problems, nil
}

// contractProblems says why the sink refused op, at the manifest line
// that has to change (or the pipeline entry that feeds the wrong view).
func contractProblems(v *manifest.View, schema cassandra.ViewSchema, emitter *manifest.Stage, op cassandra.Op, err error) manifest.Problems {
	fn := emitter.Function
	name := emitter.Name
	switch {
	case errors.Is(err, cassandra.ErrWrongView):
		return manifest.Problems{fn.Ref.Problem(fn.RefField+".binary", "%s's binary emits operations on view %s, but its output %s feeds view %s (%s)",
			name, op.View.View, emitter.Output, v.Name, v.File)}
	case errors.Is(err, cassandra.ErrBadKey):
		return manifest.Problems{v.Problem("key", "%s emits a key the view does not have: %v", name, err)}
	}
	var out manifest.Problems
	for _, c := range op.View.Columns {
		i := slices.IndexFunc(schema.Columns, func(d cassandra.ValueColumn) bool { return d.Name == c.Column })
		switch {
		case i < 0:
			out = append(out, v.Problem("columns", "%s emits %s, which %s lacks", name, c.Column, v.File))
		case schema.Columns[i].Merge != c.Merge:
			out = append(out, v.Problem(fmt.Sprintf("columns[%d].merge", i), "%s merges %s by %s, the view by %s", name, c.Column, c.Merge, schema.Columns[i].Merge))
		}
	}
	if len(out) == 0 && !errors.Is(err, cassandra.ErrEpochChanged) {
		out = append(out, v.Problem("columns", "the sink would refuse what %s emits: %v", name, err))
	}
	return out
}
