package chainmain

import (
	"errors"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shop's mains are one line each; Read finds their transformations.
func TestReadShopMains(t *testing.T) {
	for dir, want := range map[string]Transformation{
		"../../../functions/shop/validate/cmd":     {"github.com/foldline/foldline/functions/shop/validate", "Transformation"},
		"../../../functions/shop/useractivity/cmd": {"github.com/foldline/foldline/functions/shop/useractivity", "Transformation"},
	} {
		got, err := Read(dir)
		if err != nil || got != want {
			t.Errorf("Read(%s) = %+v, %v; want %+v", dir, got, err, want)
		}
	}
}

// Anything but the one line is refused, with what it holds instead.
func TestReadRefuses(t *testing.T) {
	const head = "package main\n\nimport (\n\t\"github.com/foldline/foldline/functions/transform/run\"\n\tua \"example.com/m/ua\"\n)\n\n"
	ok := head + "func main() { run.Main(ua.Transformation) }\n"
	if got, err := parse("ok.go", []byte(ok)); err != nil || got != (Transformation{"example.com/m/ua", "Transformation"}) {
		t.Fatalf("the one line: %+v, %v", got, err)
	}
	for name, src := range map[string]string{
		"two statements":   head + "func main() { println(); run.Main(ua.Transformation) }\n",
		"an init":          head + "func init() {}\nfunc main() { run.Main(ua.Transformation) }\n",
		"a var":            head + "var x = 1\nfunc main() { run.Main(ua.Transformation) }\n",
		"another Main":     head + "func main() { run.Handler(ua.Transformation) }\n",
		"a local value":    head + "func main() { run.Main(ua.New()) }\n",
		"not package main": strings.Replace(ok, "package main", "package x", 1),
		"a blank import":   strings.Replace(ok, "import (\n", "import (\n\t_ \"example.com/m/side\"\n", 1),
		"another run":      strings.Replace(ok, "functions/transform/run", "functions/transform/runx", 1),
		"an odd path":      strings.Replace(ok, "example.com/m/ua", "example.com/m/ua\\\"x", 1),
		"unexported":       head + "func main() { run.Main(ua.transformation) }\n",
	} {
		if got, err := parse(name+".go", []byte(src)); err == nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"a.go", "b.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(ok), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Read(dir); !errors.Is(err, ErrNotOneLine) {
		t.Errorf("two files: %v, want ErrNotOneLine", err)
	}
}

// The generated mains are gofmt'ed Go that call MainChain (a chain) or
// the runner's Main (a backfill's runner on the cluster) with each
// transformation, in order.
func TestSource(t *testing.T) {
	ts := []Transformation{{"example.com/m/validate", "Transformation"}, {"example.com/m/ua", "T"}}
	for _, tc := range []struct {
		src       []byte
		call, pkg string
	}{
		{Source(ts), "run.MainChain(t0.Transformation, t1.T)", `run "` + RunPackage + `"`},
		{RunnerSource(ts), "runner.Main(t0.Transformation, t1.T)", `runner "` + RunnerPackage + `"`},
	} {
		formatted, err := format.Source(tc.src)
		if err != nil {
			t.Fatalf("not Go: %v\n%s", err, tc.src)
		}
		if string(formatted) != string(tc.src) {
			t.Errorf("not gofmt'ed:\n%s", tc.src)
		}
		for _, want := range []string{tc.call, tc.pkg, `t1 "example.com/m/ua"`} {
			if !strings.Contains(string(tc.src), want) {
				t.Errorf("source without %s:\n%s", want, tc.src)
			}
		}
	}
}
