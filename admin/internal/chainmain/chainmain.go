// Package chainmain writes the main package of a chain binary: one process
// that runs a path's transformations one after the other
// (transform/run.MainChain), each handing its outputs to the next in
// memory. It is made from the functions' own mains, when each is the
// one-line main a transformation has:
//
//	func main() { run.Main(useractivity.Transformation) }
//
// The chain then runs the very transformations the deployed functions
// run, through the same runtime; only the pipes between the processes
// of a local run are gone. Any other main (a handler of its own, flags,
// an init with effects) is not chained, and its function runs in a
// process of its own.
package chainmain

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// RunPackage is the import path of the package whose Main a transformation's
// main calls.
const RunPackage = "github.com/foldline/foldline/functions/transform/run"

// ErrNotOneLine is wrapped by Read's errors about a main that is not a
// transformation's one line.
var ErrNotOneLine = errors.New("not a one-line transformation main")

// Transformation is what a one-line main runs: the exported variable Var
// of the package Package.
type Transformation struct {
	Package, Var string
}

// importPath is the form an import path of a chain's transformation must
// have to be written into the generated source.
var importPath = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)

// Read reads the main package in dir, which must be one Go file (tests
// aside) holding nothing but its imports (the run package and the
// transformation's) and func main() { run.Main(pkg.Var) }, and returns
// the transformation.
func Read(dir string) (Transformation, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return Transformation{}, fmt.Errorf("listing %s: %w", dir, err)
	}
	var sources []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			sources = append(sources, f)
		}
	}
	if len(sources) != 1 {
		return Transformation{}, fmt.Errorf("%s: %d Go files, want one: %w", dir, len(sources), ErrNotOneLine)
	}
	src, err := os.ReadFile(sources[0])
	if err != nil {
		return Transformation{}, fmt.Errorf("reading %s: %w", sources[0], err)
	}
	t, err := parse(sources[0], src)
	if err != nil {
		return Transformation{}, fmt.Errorf("%s: %w: %w", sources[0], err, ErrNotOneLine)
	}
	return t, nil
}

// parse finds the transformation of a one-line main's source.
func parse(name string, src []byte) (Transformation, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	if err != nil {
		return Transformation{}, err
	}
	if f.Name.Name != "main" {
		return Transformation{}, fmt.Errorf("package %s, not main", f.Name.Name)
	}
	imports := map[string]string{} // name in the file → import path
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return Transformation{}, fmt.Errorf("import %s: %w", spec.Path.Value, err)
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if name == "_" || name == "." {
			return Transformation{}, fmt.Errorf("import %s %q: a blank or dot import", name, path)
		}
		imports[name] = path
	}
	if len(imports) != 2 || len(f.Imports) != 2 {
		return Transformation{}, fmt.Errorf("%d imports, want two (%s and the transformation's)", len(f.Imports), RunPackage)
	}
	var main *ast.FuncDecl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok != token.IMPORT {
				return Transformation{}, fmt.Errorf("a %s declaration besides main", d.Tok)
			}
		case *ast.FuncDecl:
			if d.Name.Name != "main" || d.Recv != nil || main != nil {
				return Transformation{}, fmt.Errorf("func %s besides main", d.Name.Name)
			}
			main = d
		}
	}
	if main == nil || main.Body == nil || len(main.Body.List) != 1 {
		return Transformation{}, errors.New("main is not one statement")
	}
	stmt, ok := main.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return Transformation{}, errors.New("main's statement is not a call")
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 || call.Ellipsis.IsValid() {
		return Transformation{}, errors.New("main's statement is not a call of one argument")
	}
	runName, fn, ok := selector(call.Fun)
	if !ok || fn != "Main" || imports[runName] != RunPackage {
		return Transformation{}, fmt.Errorf("main does not call %s.Main", RunPackage)
	}
	pkgName, v, ok := selector(call.Args[0])
	if !ok || pkgName == runName || imports[pkgName] == "" || !ast.IsExported(v) {
		return Transformation{}, errors.New("run.Main's argument is not an exported variable of an imported package")
	}
	path := imports[pkgName]
	if !importPath.MatchString(path) {
		return Transformation{}, fmt.Errorf("import path %q", path)
	}
	return Transformation{Package: path, Var: v}, nil
}

// selector returns x and sel of an expression x.sel where x is a name.
func selector(e ast.Expr) (x, sel string, ok bool) {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", "", false
	}
	id, ok := s.X.(*ast.Ident)
	if !ok {
		return "", "", false
	}
	return id.Name, s.Sel.Name, true
}

// RunnerPackage is the import path of the package whose Main a backfill's
// runner on the cluster calls (RunnerSource).
const RunnerPackage = "github.com/foldline/foldline/admin/backfill/runner"

// Source returns the main package that runs ts as a chain, in that order.
func Source(ts []Transformation) []byte {
	return source(ts, "a local run of a path's transformations", "run", RunPackage, "MainChain")
}

// RunnerSource returns the main package of a backfill's runner on the
// cluster (foldline backfill --engine cluster) for a path of ts, in that
// order: the function the worker runs, which runs the fused backfill and,
// as its local chain, ts.
func RunnerSource(ts []Transformation) []byte {
	return source(ts, "a backfill's run on the cluster", "runner", RunnerPackage, "Main")
}

// source writes a main package that calls fn of the package at path
// (imported as name) with ts.
func source(ts []Transformation, what, name, path, fn string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by foldline for %s; DO NOT EDIT.\n\npackage main\n\nimport (\n", what)
	fmt.Fprintf(&b, "\t%s %s\n", name, strconv.Quote(path))
	for i, t := range ts {
		fmt.Fprintf(&b, "\tt%d %s\n", i, strconv.Quote(t.Package))
	}
	fmt.Fprintf(&b, ")\n\nfunc main() {\n\t%s.%s(", name, fn)
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "t%d.%s", i, t.Var)
	}
	b.WriteString(")\n}\n")
	if formatted, err := format.Source(b.Bytes()); err == nil {
		return formatted
	}
	return b.Bytes() // the go command says what is wrong with it
}
