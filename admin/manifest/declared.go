package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/internal/plainfile"
)

// Declared views.
//
// A view with a from section is declared from the events of a topic, with
// no Go: its columns say how events fold into them (aggregate, value), and
// the loader adds to the set the function that does it — the generic
// transformation DeclaredBinary, reading from.input, writing the view's
// sink.input, the view's Spec in its user config. Deploy, plan, status
// and backfill then see an ordinary stage of the DAG, and its problems
// are reported at the view's fields. Lint reads from.sample with the same
// Spec, so that a field the view names and the events lack is found
// before deploy.

// From declares a view straight from the events of a topic.
type From struct {
	// Input is the topic whose events the view folds: a ledger topic, or a
	// pipeline topic such as the shop's validated events. Required.
	Input string `yaml:"input"`
	// Filter keeps the events whose fields equal the given values: field
	// name to a value, or a list of values (any of them); every field must
	// hold. Values are strings, integers or booleans, e.g. {type: purchase}.
	// An event without the field is left out, not dead-lettered. Default:
	// every event.
	Filter map[string]any `yaml:"filter"`
	// Key is the event field whose value keys the row (the view's one key
	// column). Required.
	Key string `yaml:"key"`
	// Sample is a file of example events, one JSON object a line, relative
	// to the manifest directory; lint checks every field the view names
	// against the events of it that the filter keeps. Required.
	Sample string `yaml:"sample"`
}

// DeclaredBinary is the package of the transformation that runs every
// declared view.
const DeclaredBinary = "github.com/foldline/foldline/functions/declared/cmd"

// DeclaredFunctionName is the name of the function of a declared view.
func DeclaredFunctionName(view string) string { return view + "-declared" }

// MaxSampleBytes bounds a sample file's size.
const MaxSampleBytes = 16 << 20

// declaredFields maps the fields of a declared view's function to the
// view's, where its problems are reported.
var declaredFields = map[string]string{
	"":          "from",
	"name":      "name",
	"subName":   "name",
	"inputs":    "from.input",
	"output":    "sink.input",
	"namespace": "sink.input",
}

// declareFunctions adds the function of every declared view.
func (s *Set) declareFunctions() {
	for _, v := range s.Views {
		if v.From != nil {
			s.Functions = append(s.Functions, s.declaredFunction(v))
		}
	}
}

// declaredFunction is the function that folds a declared view's events:
// configured as the shop's own functions are (a new subscription starts
// at the first event, key-ordered, bad events to a dead-letter topic),
// in the namespace of the view's operations.
func (s *Set) declaredFunction(v *View) *Function {
	tenant, namespace := "", v.Sink.Namespace
	if s.Tenant != nil {
		tenant = s.Tenant.Name
	}
	if tn, err := utils.GetTopicName(v.Sink.Input); err == nil {
		namespace = strings.TrimPrefix(tn.GetNamespace(), tn.GetTenant()+"/")
	}
	name := DeclaredFunctionName(v.Name)
	spec, _ := v.declaredSpec() // its problems are the view's (checkDeclared)
	text, err := spec.Encode()
	if err != nil {
		text = "" // a spec that does not encode is reported by checkDeclared
	}
	src := v.Source
	src.fields = declaredFields
	return &Function{
		Binary:   DeclaredBinary,
		Declared: v,
		Ref:      src,
		RefField: "from",
		Source:   src,
		Config: utils.FunctionConfig{
			Tenant:                       tenant,
			Namespace:                    namespace,
			Name:                         name,
			Runtime:                      utils.GoRuntime,
			Inputs:                       []string{v.From.Input},
			Output:                       v.Sink.Input,
			SubName:                      name,
			SubscriptionPosition:         "Earliest",
			CleanupSubscription:          true,
			Parallelism:                  1,
			ProcessingGuarantees:         "ATLEAST_ONCE",
			AutoAck:                      true,
			ForwardSourceMessageProperty: true,
			UserConfig: map[string]any{
				UserConfigSubscriptionType: "key_shared",
				UserConfigDeadLetterTopic:  fmt.Sprintf("persistent://%s/%s/%s-dlq", tenant, namespace, name),
				UserConfigMaxRetries:       3,
				UserConfigRetryBackoffMs:   200,
				declared.UserConfigSpec:    text,
			},
		},
	}
}

// declaredSpec builds the Spec of a declared view, with the problems of
// the fields that do not convert (filter values, the number of key
// columns).
func (v *View) declaredSpec() (declared.Spec, Problems) {
	var ps Problems
	spec := declared.Spec{View: v.Name, Key: declared.KeySpec{Field: v.From.Key}}
	if len(v.Key) > 0 {
		spec.Key.Column, spec.Key.Type = v.Key[0].Name, v.Key[0].Type
	}
	if len(v.Key) > 1 {
		ps = append(ps, v.Problem("key[1]", "%d key columns: a declared view has one, filled from the event field from.key", len(v.Key)))
	}
	for _, field := range slices.Sorted(maps.Keys(v.From.Filter)) {
		values, isList := v.From.Filter[field].([]any)
		if !isList {
			values = []any{v.From.Filter[field]}
		}
		lits := make([]declared.Literal, 0, len(values))
		for _, value := range values {
			lit, err := declared.NewLiteral(value)
			if err != nil {
				ps = append(ps, v.Problem("from.filter."+field, "%v", err))
				continue
			}
			lits = append(lits, lit)
		}
		if len(lits) < len(values) {
			continue // reported
		}
		if spec.Filter == nil {
			spec.Filter = map[string][]declared.Literal{}
		}
		spec.Filter[field] = lits
	}
	for _, c := range v.Columns {
		spec.Columns = append(spec.Columns, declared.ColumnSpec{Name: c.Name, Type: c.Type, Aggregate: c.Aggregate, Value: c.Value})
	}
	return spec, ps
}

// specField maps a field of a Spec to the declared view's (the columns
// keep theirs).
func specField(field string) string {
	switch {
	case field == "view":
		return "name"
	case field == "key.column":
		return "key[0].name"
	case field == "key.type":
		return "key[0].type"
	case field == "key.field":
		return "from.key"
	case strings.HasPrefix(field, "filter"):
		return "from." + field
	}
	return field
}

// checkDeclared returns the problems of a view's from section and
// aggregates: for a view without from, any aggregate or value; for a
// declared one, its Spec's, merges that disagree with their aggregate,
// and the fields the events of from.sample lack.
func (s *Set) checkDeclared(v *View) Problems {
	var ps Problems
	if v.From == nil {
		for i, c := range v.Columns {
			for field, set := range map[string]bool{"aggregate": c.Aggregate != "", "value": !c.Value.IsZero()} {
				if set {
					ps = append(ps, v.Problem(fmt.Sprintf("columns[%d].%s", i, field), "only a declared view (one with from) folds events by itself; this view's operations come from a pipeline function: remove it, or declare the view with from"))
				}
			}
		}
		return ps
	}
	spec, ps := v.declaredSpec()
	readable := len(ps) == 0 // the sample is read with a spec that compiles
	for i, c := range v.Columns {
		if want := c.Aggregate.Merge(); want != "" && c.Merge != want {
			ps = append(ps, v.Problem(fmt.Sprintf("columns[%d].merge", i), "%s disagrees with aggregate %s, which merges by %s: leave merge out (the aggregate implies it)", c.Merge, c.Aggregate, want))
		}
	}
	for _, err := range unjoin(spec.Validate()) {
		var se *declared.SpecError
		if errors.As(err, &se) {
			readable = false
			ps = append(ps, v.Problem(specField(se.Field), "%s", se.Message))
		}
	}
	if !readable {
		return ps
	}
	program, err := declared.Compile(spec)
	if err != nil {
		return append(ps, v.Problem("from", "%v", err))
	}
	return append(ps, s.checkSample(v, program)...)
}

// sampleEvent is one line of a sample file.
type sampleEvent struct {
	line    int
	payload []byte
	fields  map[string]json.RawMessage
}

// readSample reads a declared view's from.sample: the events, or the
// problems that stop the check.
func (s *Set) readSample(v *View) ([]sampleEvent, Problems) {
	name := v.From.Sample
	switch {
	case name == "":
		return nil, Problems{v.Problem("from.sample", "missing: name a file of example events (JSON lines, relative to the manifest directory) that lint checks the view's fields against; foldline gen writes one")}
	case !filepath.IsLocal(name):
		return nil, Problems{v.Problem("from.sample", "%q: want a path inside the manifest directory", name)}
	}
	path := filepath.Join(s.Dir, name)
	data, err := plainfile.Read(path, MaxSampleBytes)
	switch {
	case errors.Is(err, plainfile.ErrTooLarge):
		return nil, Problems{v.Problem("from.sample", "%s is larger than %d bytes: a sample needs a few hundred events", name, MaxSampleBytes)}
	case err != nil:
		return nil, Problems{v.Problem("from.sample", "reading %s: %v", name, err)}
	}
	var events []sampleEvent
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
			return nil, Problems{{File: path, Line: i + 1, Message: fmt.Sprintf("not a JSON object: a sample holds one event a line (%v)", err)}}
		}
		events = append(events, sampleEvent{line: i + 1, payload: line, fields: fields})
	}
	if len(events) == 0 {
		return nil, Problems{v.Problem("from.sample", "%s holds no event", name)}
	}
	return events, nil
}

// fieldTally counts the events of a sample that miss one field a view
// names, or hold a value that does not fit.
type fieldTally struct {
	column  int    // -1 for the key
	field   string // "" for a value as a whole
	missing int
	wrong   int
	// first is the line of the first event in trouble, problem its
	// problem (wrong values).
	firstMissing, firstWrong int
	problem                  string
}

// checkSample reads the view's sample with the view's own program, and
// reports each field the view needs that the events it keeps lack, or
// hold with another type, at the view's field that names it.
func (s *Set) checkSample(v *View, program *declared.Program) Problems {
	events, ps := s.readSample(v)
	if ps != nil {
		return ps
	}
	sample := v.From.Sample
	kept := 0
	var tallies []*fieldTally
	tally := func(fe *declared.FieldError) *fieldTally {
		for _, t := range tallies {
			if t.column == fe.Column && t.field == fe.Field {
				return t
			}
		}
		t := &fieldTally{column: fe.Column, field: fe.Field}
		tallies = append(tallies, t)
		return t
	}
	for _, e := range events {
		c, err := program.Read(e.payload)
		var fes declared.FieldErrors
		switch {
		case errors.As(err, &fes):
			for _, fe := range fes {
				t := tally(fe)
				if fe.Missing {
					if t.missing++; t.missing == 1 {
						t.firstMissing = e.line
					}
				} else if t.wrong++; t.wrong == 1 {
					t.firstWrong, t.problem = e.line, fe.Problem
				}
			}
			kept++
		case err != nil:
			return Problems{{File: filepath.Join(s.Dir, sample), Line: e.line, Message: err.Error()}}
		case c.Matched:
			kept++
		}
	}
	if kept == 0 {
		for _, field := range slices.Sorted(maps.Keys(v.From.Filter)) {
			if !slices.ContainsFunc(events, func(e sampleEvent) bool { _, ok := e.fields[field]; return ok }) {
				ps = append(ps, v.Problem("from.filter."+field, "field %s is in no event of %s", field, sample))
			}
		}
		if len(ps) == 0 {
			ps = append(ps, v.Problem("from.filter", "no event of %s matches it (%d events): the view would stay empty", sample, len(events)))
		}
		return ps
	}
	noun, nouns := keptNoun(v.From.Filter)
	slices.SortStableFunc(tallies, func(a, b *fieldTally) int { return a.column - b.column })
	for _, t := range tallies {
		field := "from.key"
		if t.column >= 0 {
			field = fmt.Sprintf("columns[%d].value", t.column)
		}
		switch {
		case t.missing == kept:
			ps = append(ps, v.Problem(field, "field %s is in no %s of %s", t.field, noun, sample))
		case t.missing > 0:
			ps = append(ps, v.Problem(field, "field %s is missing from %d of the %d %s of %s (the first at line %d): they would go to the dead-letter topic", t.field, t.missing, kept, nouns, sample, t.firstMissing))
		}
		if t.wrong > 0 {
			what := "field " + t.field + " " + t.problem
			if t.field == "" {
				what = t.problem
			}
			ps = append(ps, v.Problem(field, "%s in %d of the %d %s of %s (the first at line %d): they would go to the dead-letter topic", what, t.wrong, kept, nouns, sample, t.firstWrong))
		}
	}
	return ps
}

// keptNoun names the events a filter keeps, one and several: "purchase
// event" for {type: purchase}, "event matching from.filter" for other
// filters.
func keptNoun(filter map[string]any) (one, several string) {
	switch len(filter) {
	case 0:
		return "event", "events"
	case 1:
		for _, value := range filter {
			if s, ok := value.(string); ok && declared.IsFieldName(s) {
				return s + " event", s + " events"
			}
		}
	}
	return "event matching from.filter", "events matching from.filter"
}
