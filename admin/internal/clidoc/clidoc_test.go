package clidoc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestInline(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "an underscore inside a word stays", in: "user_activity", want: "user_activity"},
		{name: "a tag-like name is escaped", in: "<view>_v<N+1>", want: `\<view\>\_v\<N+1\>`},
		{name: "emphasis, code and cells", in: "* marks `x` | y", want: "\\* marks \\`x\\` \\| y"},
		{name: "links", in: "[$FOLDLINE_CONFIG]", want: `\[$FOLDLINE_CONFIG\]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inline(tt.in); got != tt.want {
				t.Errorf("inline(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestProse(t *testing.T) {
	long := "A paragraph\nwrapped over lines.\n\n--until makes it a replay.\n\nExit codes:\n  0  success\n  1  failed\n"
	want := []string{
		"A paragraph wrapped over lines.",
		`\--until makes it a replay.`,
		"Exit codes:",
		"```\n0  success\n1  failed\n```",
	}
	got := prose(long)
	if strings.Join(got, "\n\n") != strings.Join(want, "\n\n") {
		t.Errorf("prose:\n%s\nwant:\n%s", strings.Join(got, "\n\n"), strings.Join(want, "\n\n"))
	}
}

func TestWrite(t *testing.T) {
	root := &cobra.Command{Use: "tool", Short: "A tool"}
	root.PersistentFlags().String("server", "", "where to connect")
	sub := &cobra.Command{Use: "zeta NAME", Short: "Last by name", Run: func(*cobra.Command, []string) {}}
	sub.Flags().IntP("count", "n", 3, "how many")
	sub.Flags().Bool("dry-run", false, "change nothing")
	first := &cobra.Command{Use: "alpha", Short: "First by name", Run: func(*cobra.Command, []string) {}}
	hidden := &cobra.Command{Use: "secret", Short: "Hidden", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub, first, hidden)
	var a, b bytes.Buffer
	if err := Write(&a, root); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, root); err != nil {
		t.Fatal(err)
	}
	out := a.String()
	if out != b.String() {
		t.Error("two writes of one tree differ")
	}
	if strings.Index(out, "## tool alpha") > strings.Index(out, "## tool zeta") {
		t.Error("commands are not in name order")
	}
	for _, want := range []string{
		"```\ntool zeta NAME [flags]\n```",
		"| `-n`, `--count` | int | `3` | how many |",
		"| `--dry-run` | bool |  | change nothing |",
		"| `--server` | string |  | where to connect |",
		"- [tool zeta](#tool-zeta): Last by name",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the reference lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("the reference shows a hidden command:\n%s", out)
	}
}
