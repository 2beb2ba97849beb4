// Command skipreport reads the events of `go test -json` on stdin and prints
// what a plain `go test` would (a line per package, the output of failed
// tests, build errors), then every skipped test grouped by its skip message.
// Tests that need the local stack skip through internal/testenv, whose
// message names the service that did not answer and the script that starts
// it, so the list says what a run without the stack left out and how to run
// it. scripts/unit pipes go test into it.
//
// go test itself cannot end with such a list: in package list mode
// (go test ./...) it prints nothing of a package that passed but its ok line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if err := report(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "skipreport:", err)
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json), with the build events
// of go test -json (ImportPath).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// skipped is a test that skipped, with its message.
type skipped struct {
	pkg, test, reason string
}

// fileLine is the file:line: prefix of a test's log line.
var fileLine = regexp.MustCompile(`^\S+\.go:\d+: `)

func report(r io.Reader, w io.Writer) error {
	// Output is kept per package (its own lines), per top-level test (its
	// lines and its subtests', printed whole if it fails) and per test (for
	// the skip message).
	pkgOut := map[string][]string{}
	treeOut := map[string][]string{}
	testOut := map[string][]string{}
	var skips []skipped
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet's or the go command's own message).
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		tree := e.Package + " " + strings.SplitN(e.Test, "/", 2)[0]
		test := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "output" && e.Test == "":
			pkgOut[e.Package] = append(pkgOut[e.Package], e.Output)
		case e.Action == "output":
			treeOut[tree] = append(treeOut[tree], e.Output)
			testOut[test] = append(testOut[test], e.Output)
		case e.Test == "" && (e.Action == "pass" || e.Action == "skip"):
			// A passing package shows its ok (or no test files) line only.
			for _, l := range pkgOut[e.Package] {
				if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") {
					fmt.Fprint(w, l)
				}
			}
			delete(pkgOut, e.Package)
		case e.Test == "" && e.Action == "fail":
			fmt.Fprint(w, strings.Join(pkgOut[e.Package], ""))
			delete(pkgOut, e.Package)
		case e.Action == "fail" && !strings.Contains(e.Test, "/"):
			// As go test prints a failed test: its logs and its subtests'
			// results, without the -v lines that -json turns on.
			for _, l := range treeOut[tree] {
				t := strings.TrimSpace(l)
				if !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- PASS") && !strings.HasPrefix(t, "--- SKIP") {
					fmt.Fprint(w, l)
				}
			}
		case e.Action == "skip":
			skips = append(skips, skipped{pkg: e.Package, test: e.Test, reason: skipReason(testOut[test])})
		}
		if e.Test != "" && e.Action != "output" && e.Action != "run" && e.Action != "pause" && e.Action != "cont" {
			delete(testOut, test)
			if !strings.Contains(e.Test, "/") {
				delete(treeOut, tree)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test -json: %w", err)
	}
	writeSkips(w, skips)
	return nil
}

// skipReason is a skipped test's message: its log lines without go test's
// own (=== RUN, --- SKIP) and without their file:line prefixes.
func skipReason(out []string) string {
	var lines []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		lines = append(lines, fileLine.ReplaceAllString(t, ""))
	}
	if len(lines) == 0 {
		return "(no message)"
	}
	return strings.Join(lines, " ")
}

// writeSkips prints the skipped tests grouped by message, the message that
// most tests share first.
func writeSkips(w io.Writer, skips []skipped) {
	if len(skips) == 0 {
		return
	}
	byReason := map[string][]skipped{}
	var reasons []string
	for _, s := range skips {
		if byReason[s.reason] == nil {
			reasons = append(reasons, s.reason)
		}
		byReason[s.reason] = append(byReason[s.reason], s)
	}
	slices.SortStableFunc(reasons, func(a, b string) int { return len(byReason[b]) - len(byReason[a]) })
	plural := "s"
	if len(reasons) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "\n%d skipped, for %d reason%s:\n", len(skips), len(reasons), plural)
	for _, reason := range reasons {
		group := byReason[reason]
		fmt.Fprintf(w, "\n%d skipped: %s\n", len(group), reason)
		var pkgs []string
		tests := map[string][]string{}
		for _, s := range group {
			if tests[s.pkg] == nil {
				pkgs = append(pkgs, s.pkg)
			}
			tests[s.pkg] = append(tests[s.pkg], s.test)
		}
		for _, p := range pkgs {
			fmt.Fprintf(w, "  %s: %s\n", p, strings.Join(tests[p], " "))
		}
	}
}
