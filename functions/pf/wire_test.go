package pf

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/foldline/foldline/internal/targetversion"
	"github.com/foldline/foldline/internal/testenv"
)

// protoFile is what the wire format depends on in a .proto file.
type protoFile struct {
	pkg      string
	messages map[string]map[string]protoField // message path (Outer.Inner) → field name → field
	enums    map[string]map[string]string     // enum path → value name → number
	services map[string]map[string]string     // service → rpc → "(Request) returns (Response)"
}

type protoField struct{ label, typ, number string }

var (
	protoComment = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	protoToken   = regexp.MustCompile(`map\s*<[^>]*>|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|"[^"]*"|[{}();=\[\]<>,]`)
)

// parseProto reads the declarations of a proto3 file that fix its wire
// format: enough for the files of the worker protocol, not a general parser.
func parseProto(t *testing.T, src string) protoFile {
	t.Helper()
	toks := protoToken.FindAllString(protoComment.ReplaceAllString(src, ""), -1)
	f := protoFile{messages: map[string]map[string]protoField{}, enums: map[string]map[string]string{}, services: map[string]map[string]string{}}
	type scope struct{ kind, path string }
	var stack []scope
	path := func(name string) string {
		if len(stack) == 0 {
			return name
		}
		return stack[len(stack)-1].path + "." + name
	}
	skipTo := func(i int, tok string) int {
		for i < len(toks) && toks[i] != tok {
			i++
		}
		return i
	}
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		switch {
		case tok == "}":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case tok == "package":
			f.pkg = toks[i+1]
			i = skipTo(i, ";")
		case tok == "syntax" || tok == "import" || tok == "option" || tok == "reserved":
			i = skipTo(i, ";")
		case tok == "message" || tok == "enum" || tok == "service":
			p := path(toks[i+1])
			stack = append(stack, scope{tok, p})
			switch tok {
			case "message":
				f.messages[p] = map[string]protoField{}
			case "enum":
				f.enums[p] = map[string]string{}
			case "service":
				f.services[p] = map[string]string{}
			}
			i += 2 // past the name and "{"
		case tok == "rpc":
			// rpc Name ( Req ) returns ( Resp ) { }  or ;
			f.services[stack[len(stack)-1].path][toks[i+1]] = "(" + toks[i+3] + ") returns (" + toks[i+7] + ")"
			i += 9
			if i < len(toks) && toks[i] == "{" {
				i++ // the empty option block's "}"
			} else {
				i--
			}
		case len(stack) > 0 && stack[len(stack)-1].kind == "enum":
			// NAME = N [opts] ;
			f.enums[stack[len(stack)-1].path][tok] = toks[i+2]
			i = skipTo(i, ";")
		case len(stack) > 0 && stack[len(stack)-1].kind == "message":
			label := ""
			if tok == "repeated" || tok == "optional" {
				label, i = tok, i+1
			}
			typ := strings.Join(strings.Fields(toks[i]), "")
			f.messages[stack[len(stack)-1].path][toks[i+1]] = protoField{label: label, typ: typ, number: toks[i+3]}
			i = skipTo(i, ";")
		}
	}
	return f
}

// pulsarProtoJar is the distribution's jar of the worker protocol's .proto files.
func pulsarProtoJar(t *testing.T) string {
	t.Helper()
	home := os.Getenv("FOLDLINE_PULSAR_HOME")
	if home == "" {
		userHome, _ := os.UserHomeDir()
		home = filepath.Join(userHome, ".cache", "foldline", "apache-pulsar-"+targetversion.Pulsar)
	}
	jar := filepath.Join(home, "lib", "org.apache.pulsar-pulsar-functions-proto-"+targetversion.Pulsar+".jar")
	if _, err := os.Stat(jar); err != nil {
		testenv.Require(t, fmt.Errorf("Pulsar "+targetversion.Pulsar+" distribution not found (%w); fetch it with scripts/stack up", err))
	}
	return jar
}

func readJarFile(t *testing.T, jar, name string) string {
	t.Helper()
	zr, err := zip.OpenReader(jar)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	r, err := zr.Open(name)
	if err != nil {
		t.Fatalf("opening %s in %s: %v", name, jar, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every package, service, method, message, field (number, type, label) and
// enum value in Foldline's .proto files exists identically in the .proto
// files of the Pulsar the stack runs. Foldline's files hold only what the
// runtime reads or writes, so this proves wire compatibility for all of it.
func TestWireCompatibleWithPulsar(t *testing.T) {
	jar := pulsarProtoJar(t)
	tests := []struct{ name, ours, upstream string }{
		{name: "instance control", ours: "instance_control.proto", upstream: "InstanceCommunication.proto"},
		{name: "function details", ours: "function_details.proto", upstream: "Function.proto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oursSrc, err := os.ReadFile(filepath.Join("internal", "instancepb", tt.ours))
			if err != nil {
				t.Fatal(err)
			}
			ours := parseProto(t, string(oursSrc))
			up := parseProto(t, readJarFile(t, jar, tt.upstream))
			if ours.pkg != up.pkg {
				t.Errorf("package %q, upstream %q", ours.pkg, up.pkg)
			}
			if len(ours.messages) == 0 {
				t.Fatal("parsed no messages from our file")
			}
			for msg, fields := range ours.messages {
				upFields, ok := up.messages[msg]
				if !ok {
					t.Errorf("message %s not upstream", msg)
					continue
				}
				for name, f := range fields {
					if uf, ok := upFields[name]; !ok || uf != f {
						t.Errorf("%s.%s: ours %+v, upstream %+v (present %v)", msg, name, f, uf, ok)
					}
				}
			}
			for enum, values := range ours.enums {
				for name, num := range values {
					if got, ok := up.enums[enum][name]; !ok || got != num {
						t.Errorf("enum %s.%s = %s, upstream %q", enum, name, num, got)
					}
				}
			}
			for svc, methods := range ours.services {
				upMethods, ok := up.services[svc]
				if !ok {
					t.Errorf("service %s not upstream", svc)
				}
				for m, sig := range methods {
					if upMethods[m] != sig {
						t.Errorf("rpc %s.%s%s, upstream %q", svc, m, sig, upMethods[m])
					}
				}
				if len(methods) != len(upMethods) {
					t.Errorf("service %s: %d rpcs, upstream %d", svc, len(methods), len(upMethods))
				}
			}
		})
	}
}

// The parser must see what it is meant to check; a parser that found
// nothing would make the compatibility test pass vacuously.
func TestParseProto(t *testing.T) {
	f := parseProto(t, `
syntax = "proto3";
package proto; // the package
import "google/protobuf/empty.proto";
/* a block
   comment */
message Outer {
  message Inner { int64 at = 2; }
  repeated Inner inners = 7 [deprecated = true];
  map<string, double> m = 9;
  // int64 gone = 4;
}
enum E { A = 0; B = 10; }
service S {
  rpc Get(google.protobuf.Empty) returns (Outer) {}
  rpc Put(Outer) returns (google.protobuf.Empty);
}`)
	want := protoFile{
		pkg: "proto",
		messages: map[string]map[string]protoField{
			"Outer":       {"inners": {"repeated", "Inner", "7"}, "m": {"", "map<string,double>", "9"}},
			"Outer.Inner": {"at": {"", "int64", "2"}},
		},
		enums:    map[string]map[string]string{"E": {"A": "0", "B": "10"}},
		services: map[string]map[string]string{"S": {"Get": "(google.protobuf.Empty) returns (Outer)", "Put": "(Outer) returns (google.protobuf.Empty)"}},
	}
	if got, wantS := sprintProto(f), sprintProto(want); got != wantS {
		t.Errorf("parsed\n%s\nwant\n%s", got, wantS)
	}
}

func sprintProto(f protoFile) string {
	var b strings.Builder
	b.WriteString("package " + f.pkg + "\n")
	for _, m := range sortedKeys(f.messages) {
		for _, n := range sortedKeys(f.messages[m]) {
			fl := f.messages[m][n]
			b.WriteString(m + "." + n + " " + fl.label + " " + fl.typ + " " + fl.number + "\n")
		}
	}
	for _, e := range sortedKeys(f.enums) {
		for _, n := range sortedKeys(f.enums[e]) {
			b.WriteString(e + "." + n + " = " + f.enums[e][n] + "\n")
		}
	}
	for _, s := range sortedKeys(f.services) {
		for _, n := range sortedKeys(f.services[s]) {
			b.WriteString(s + "." + n + f.services[s][n] + "\n")
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
