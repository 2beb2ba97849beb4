package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/foldline/foldline/internal/plainfile"
)

// DefaultDir is the manifest directory lint, plan and deploy read when none
// is given.
const DefaultDir = "manifests"

// ErrNoManifests is returned when a directory holds no manifest at all.
var ErrNoManifests = errors.New("no manifests found")

// Limits on what one manifest file may cost to read: manifests come from
// anyone who can open a pull request, and lint runs in CI.
const (
	// MaxFileBytes bounds a manifest file's size.
	MaxFileBytes = 1 << 20
	// MaxFileNodes bounds the YAML nodes decoded from one file, counting
	// every node an alias repeats: a few kilobytes of nested aliases
	// ("billion laughs") otherwise expand to gigabytes.
	MaxFileNodes = 100_000
)

// readManifest reads a manifest file: a regular file (not a symlink, FIFO
// or device, which could block or never end) of at most MaxFileBytes.
func readManifest(file string) ([]byte, error) {
	data, err := plainfile.Read(file, MaxFileBytes)
	switch {
	case errors.Is(err, plainfile.ErrNotRegular):
		return nil, fmt.Errorf("%w: a manifest must be a plain file", err)
	case errors.Is(err, plainfile.ErrTooLarge):
		return nil, fmt.Errorf("larger than %d bytes: refused", MaxFileBytes)
	}
	return data, err
}

// Load reads every *.yaml and *.yml file under dir, applies defaults and
// checks the whole set (fields, references, the DAG). Problems come back
// together as a Problems error (errors.Is(err, ErrInvalid)); the Set is
// returned as far as it could be read, so that lint can go on checking it.
// A directory that cannot be read is an error of another kind.
func Load(dir string) (*Set, error) {
	files, err := yamlFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("reading %s: %w (want *.yaml files with kind Tenant, Pipeline or View)", dir, ErrNoManifests)
	}
	l := &loader{set: &Set{Dir: dir}, plain: map[string]*yaml.Node{}}
	for _, file := range files {
		l.readFile(file)
	}
	l.resolveFunctions()
	l.set.applyDefaults()
	l.set.declareFunctions()
	// A field whose value could not be read is reported once, for that:
	// the checks see it as absent.
	unreadable := l.problems
	for _, p := range l.set.check() {
		if !slices.ContainsFunc(unreadable, func(u Problem) bool { return u.File == p.File && u.Line == p.Line && u.Field == p.Field }) {
			l.problems = append(l.problems, p)
		}
	}
	return l.set, l.problems.Err()
}

func yamlFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading manifest directory %s: %w", dir, err)
	}
	slices.Sort(files)
	return files, nil
}

type loader struct {
	set      *Set
	problems Problems
	// plain holds documents without a kind: function configs, once a
	// pipeline names them.
	plain map[string]*yaml.Node
	// used records the plain files a pipeline names.
	used map[string]bool
	// budgets holds what each file may still decode (MaxFileNodes).
	budgets map[string]*budget
}

func (l *loader) readFile(file string) {
	data, err := readManifest(file)
	if err != nil {
		l.problems = append(l.problems, Problem{File: file, Line: 1, Message: fmt.Sprintf("reading: %v", err)})
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			l.problems = append(l.problems, Problem{File: file, Line: yamlErrorLine(err), Message: "not valid YAML: " + err.Error()})
			return
		}
		root := &doc
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
		kind, kindLine := kindOf(root)
		switch kind {
		case KindTenant:
			t := &Tenant{Source: Source{File: file}}
			l.decode(root, t, &t.Source)
			if l.set.Tenant != nil {
				l.problems = append(l.problems, t.Problem("kind", "a second Tenant manifest (the first is %s); one directory deploys one tenant", l.set.Tenant.File))
				continue
			}
			l.set.Tenant = t
		case KindPipeline:
			p := &Pipeline{Source: Source{File: file}}
			l.decode(root, p, &p.Source)
			l.set.Pipelines = append(l.set.Pipelines, p)
		case KindView:
			v := &View{Source: Source{File: file}}
			l.decode(root, v, &v.Source)
			l.set.Views = append(l.set.Views, v)
		case "":
			if i > 0 {
				l.problems = append(l.problems, Problem{File: file, Line: root.Line, Field: "kind", Message: "missing: want Tenant, Pipeline or View"})
				continue
			}
			l.plain[file] = root
		default:
			l.problems = append(l.problems, Problem{File: file, Line: kindLine, Field: "kind", Message: fmt.Sprintf("%q is not one of Tenant, Pipeline, View", kind)})
		}
	}
}

func (l *loader) decode(node *yaml.Node, into any, src *Source) {
	if l.budgets == nil {
		l.budgets = map[string]*budget{}
	}
	b, ok := l.budgets[src.File]
	if !ok {
		b = &budget{left: MaxFileNodes}
		l.budgets[src.File] = b
	}
	d := &decoder{src: src, problems: &l.problems, budget: b}
	d.decode(node, reflect.ValueOf(into).Elem(), "")
}

// resolveFunctions reads the function config files the pipelines name, and
// reports YAML files that are neither a manifest nor named by a pipeline.
func (l *loader) resolveFunctions() {
	l.used = map[string]bool{}
	for _, p := range l.set.Pipelines {
		for i, ref := range p.Functions {
			field := fmt.Sprintf("functions[%d]", i)
			if ref.Config == "" {
				l.problems = append(l.problems, p.Problem(field+".config", "missing: name the function's config file"))
				continue
			}
			file := filepath.Join(filepath.Dir(p.File), ref.Config)
			node, ok := l.plain[file]
			if !ok {
				if _, err := os.Stat(file); err != nil {
					l.problems = append(l.problems, p.Problem(field+".config", "%s does not exist", file))
				} else {
					l.problems = append(l.problems, p.Problem(field+".config", "%s is not a function config file (it has a kind)", file))
				}
				continue
			}
			if l.used[file] {
				l.problems = append(l.problems, p.Problem(field+".config", "%s is named by another function too", file))
				continue
			}
			l.used[file] = true
			f := &Function{Binary: ref.Binary, Stateful: ref.Stateful, Pipeline: p.Name, Ref: p.Source, RefField: field, Source: Source{File: file}}
			l.decode(node, &f.Config, &f.Source)
			l.set.Functions = append(l.set.Functions, f)
		}
	}
	for _, file := range slices.Sorted(maps.Keys(l.plain)) {
		if !l.used[file] {
			l.problems = append(l.problems, Problem{File: file, Line: l.plain[file].Line, Field: "kind", Message: "missing: want Tenant, Pipeline or View (or name this file as a function config in a pipeline)"})
		}
	}
}

func kindOf(root *yaml.Node) (string, int) {
	if root.Kind != yaml.MappingNode {
		return "", root.Line
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" {
			return root.Content[i+1].Value, root.Content[i].Line
		}
	}
	return "", root.Line
}

// yamlErrorLine digs the line out of a YAML syntax error ("yaml: line 3: …").
func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 1
}
