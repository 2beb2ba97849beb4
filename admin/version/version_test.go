package version

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/internal/targetversion"
)

func TestFromBuildInfo(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{
			name: "no build information",
			bi:   nil,
			want: Info{Version: "devel", Commit: "unknown", Go: runtime.Version()},
		},
		{
			name: "go run: no version, no vcs",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/foldline/foldline", Version: "(devel)"}},
			want: Info{Version: "devel", Commit: "unknown", Go: "go1.26.8"},
		},
		{
			name: "go build in a checkout with changes",
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: "github.com/foldline/foldline", Version: "v0.0.0-20261205231800-beea892c0ffe+dirty"},
				Settings:  settings("vcs", "git", "vcs.revision", "beea892c0ffe8d6bd9c5bd05fbbd2a1a5c3f6a01", "vcs.modified", "true"),
			},
			want: Info{Version: "v0.0.0-20261205231800-beea892c0ffe+dirty", Commit: "beea892c0ffe8d6bd9c5bd05fbbd2a1a5c3f6a01", Modified: true, Go: "go1.26.8"},
		},
		{
			name: "a tagged release",
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.8",
				Main:      debug.Module{Path: "github.com/foldline/foldline", Version: "v1.2.0"},
				Settings:  settings("vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.modified", "false"),
			},
			want: Info{Version: "v1.2.0", Commit: "0123456789abcdef0123456789abcdef01234567", Go: "go1.26.8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			tt.want.Pulsar, tt.want.Cassandra = targetversion.Pulsar, targetversion.Cassandra
			if got := FromBuildInfo(tt.bi); got != tt.want {
				t.Errorf("FromBuildInfo:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	info := Info{Version: "v1.2.0", Commit: "0123abc", Modified: true, Go: "go1.26.8", Platform: "linux/amd64", Pulsar: "4.0.8", Cassandra: "5.0.9"}
	var text bytes.Buffer
	if err := Write(&text, info, false); err != nil {
		t.Fatal(err)
	}
	want := `foldline   v1.2.0
commit     0123abc (modified: built with uncommitted changes)
go         go1.26.8 linux/amd64
pulsar     4.0.8 (targeted)
cassandra  5.0.9 (targeted)
`
	if text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	var js bytes.Buffer
	if err := Write(&js, info, true); err != nil {
		t.Fatal(err)
	}
	var back Info
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, js.String())
	}
	if back != info {
		t.Errorf("-o json read back as %+v, want %+v", back, info)
	}
	for _, key := range []string{`"version"`, `"commit"`, `"modified"`, `"go"`, `"platform"`, `"pulsar"`, `"cassandra"`} {
		if !strings.Contains(js.String(), key) {
			t.Errorf("-o json lacks %s:\n%s", key, js.String())
		}
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		check   func(t *testing.T, out string)
	}{
		{
			name: "text",
			args: nil,
			check: func(t *testing.T, out string) {
				if out != Text(Current()) {
					t.Errorf("got %q, want %q", out, Text(Current()))
				}
				if !strings.Contains(out, "pulsar     "+targetversion.Pulsar) || !strings.Contains(out, "cassandra  "+targetversion.Cassandra) {
					t.Errorf("the targeted versions are missing:\n%s", out)
				}
			},
		},
		{
			name: "json",
			args: []string{"-o", "json"},
			check: func(t *testing.T, out string) {
				var info Info
				if err := json.Unmarshal([]byte(out), &info); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, out)
				}
				if info != Current() {
					t.Errorf("got %+v, want %+v", info, Current())
				}
			},
		},
		{name: "bad output", args: []string{"-o", "yaml"}, wantErr: exitcode.ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, out.String())
			}
		})
	}
}
