// Package clidoc writes the foldline CLI reference (docs/cli.md) from the
// cobra command tree, so that the reference is the commands' own help and
// cannot drift from it: a test in admin/cmd/foldline regenerates it in
// memory and fails when the file differs.
//
// The output is deterministic: commands and flags in name order, no dates,
// nothing read from the environment. Cobra's own doc package would do it
// too, but it pulls in a man-page renderer the module does not otherwise
// need.
package clidoc

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// RefreshCommand is what refreshes docs/cli.md; the test's failure names it.
const RefreshCommand = "go generate ./admin/cmd/foldline"

// Write writes the reference of root and every available command under it
// (hidden commands, help and deprecated ones left out) to w as markdown.
func Write(w io.Writer, root *cobra.Command) error {
	// Execute adds cobra's completion command; add it here too, so that the
	// reference is the same whether written by a running foldline or by a
	// test that only built the tree.
	root.InitDefaultCompletionCmd()
	cmds := commands(root)
	for _, c := range cmds {
		// As Execute does for the command it runs: --help, and the
		// parents' persistent flags merged in, so that a usage line says
		// [flags] the first time as every later time.
		c.InitDefaultHelpFlag()
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s command reference\n\n", root.Name())
	fmt.Fprintf(bw, "Generated from the command tree by `%s`; do not edit. ", RefreshCommand)
	fmt.Fprintf(bw, "`%s <command> --help` prints the same.\n\n", root.Name())
	for _, c := range cmds {
		indent := strings.Repeat("  ", depth(c))
		fmt.Fprintf(bw, "%s- [%s](#%s): %s\n", indent, c.CommandPath(), Anchor(c), inline(c.Short))
	}
	for _, c := range cmds {
		section(bw, c)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the CLI reference: %w", err)
	}
	return nil
}

// Anchor is the fragment GitHub gives the heading of c's section.
func Anchor(c *cobra.Command) string {
	return strings.ReplaceAll(strings.ToLower(c.CommandPath()), " ", "-")
}

// commands lists root and its available descendants, depth first, each
// command's children in name order.
func commands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	children := slices.Clone(root.Commands())
	slices.SortFunc(children, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
	for _, c := range children {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		out = append(out, commands(c)...)
	}
	return out
}

func depth(c *cobra.Command) int {
	n := 0
	for p := c; p.HasParent(); p = p.Parent() {
		n++
	}
	return n
}

// section writes c's part of the reference: blocks of markdown separated
// by blank lines.
func section(w io.Writer, c *cobra.Command) {
	blocks := []string{"## " + c.CommandPath()}
	if c.Short != "" && !strings.HasPrefix(c.Long, c.Short) {
		blocks = append(blocks, inline(c.Short))
	}
	blocks = append(blocks, "```\n"+c.UseLine()+"\n```")
	if c.Long != "" && c.Long != c.Short {
		blocks = append(blocks, prose(c.Long)...)
	}
	if c.Example != "" {
		blocks = append(blocks, "Examples:", "```\n"+dedent(strings.Split(strings.TrimRight(c.Example, "\n"), "\n"))+"\n```")
	}
	var subs []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() && !s.IsAdditionalHelpTopicCommand() {
			subs = append(subs, fmt.Sprintf("[%s](#%s)", s.Name(), Anchor(s)))
		}
	}
	if len(subs) > 0 {
		slices.Sort(subs)
		blocks = append(blocks, "Commands: "+strings.Join(subs, ", ")+".")
	}
	if !c.HasParent() {
		blocks = append(blocks, flagTable("Flags", c.LocalNonPersistentFlags())...)
		blocks = append(blocks, "### Global flags", "Every command takes these: the connection settings (see [foldline config](#foldline-config)).")
		blocks = append(blocks, flagTable("", c.PersistentFlags())...)
	} else {
		blocks = append(blocks, flagTable("Flags", c.NonInheritedFlags())...)
		// Inherited flags are documented where they are defined; the
		// root's would repeat on every command.
		own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
			if c.Root().PersistentFlags().Lookup(f.Name) == nil {
				own.AddFlag(f)
			}
		})
		blocks = append(blocks, flagTable("Flags inherited from "+c.Parent().CommandPath(), own)...)
		blocks = append(blocks, "And the [global flags](#global-flags).")
	}
	fmt.Fprintf(w, "\n%s\n", strings.Join(blocks, "\n\n"))
}

// flagTable returns the blocks of a table of the visible flags of fs but
// --help, which every command has; none when there are none.
func flagTable(title string, fs *pflag.FlagSet) []string {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		typ, usage := pflag.UnquoteUsage(f)
		if typ == "" {
			typ = f.Value.Type()
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", name, typ, defaultOf(f), cell(usage)))
	})
	if len(rows) == 0 {
		return nil
	}
	table := "| flag | type | default | description |\n|---|---|---|---|\n" + strings.Join(rows, "\n")
	if title == "" {
		return []string{table}
	}
	return []string{title + ":", table}
}

// defaultOf is f's default as the command line would spell it; empty for
// the zero values pflag's own help leaves out.
func defaultOf(f *pflag.Flag) string {
	switch {
	case f.DefValue == "", f.DefValue == "false", f.DefValue == "[]", f.DefValue == "0s",
		f.DefValue == "0" && f.Value.Type() != "string":
		return ""
	}
	return "`" + f.DefValue + "`"
}

// prose returns a command's long text as blocks: its paragraphs, each
// joined into one line, and its indented lines (examples, tables) as code.
func prose(text string) []string {
	var blocks []string
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	indented := func(l string) bool { return l != "" && (l[0] == ' ' || l[0] == '\t') }
	blank := func(l string) bool { return strings.TrimSpace(l) == "" }
	for i := 0; i < len(lines); {
		j := i + 1
		switch {
		case blank(lines[i]):
			i = j
			continue
		case indented(lines[i]):
			for j < len(lines) && (blank(lines[j]) || indented(lines[j])) {
				j++
			}
			block := lines[i:j]
			for blank(block[len(block)-1]) {
				block = block[:len(block)-1]
			}
			blocks = append(blocks, "```\n"+dedent(block)+"\n```")
		default:
			for j < len(lines) && !blank(lines[j]) && !indented(lines[j]) {
				j++
			}
			blocks = append(blocks, paragraph(strings.Join(lines[i:j], " ")))
		}
		i = j
	}
	return blocks
}

// dedent removes the indentation every non-blank line of lines shares.
func dedent(lines []string) string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if common < 0 || n < common {
			common = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		out[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(out, "\n")
}

// paragraph escapes a paragraph's text and its first character, which
// markdown would otherwise read as a list, heading or quote.
func paragraph(s string) string {
	s = inline(s)
	if s != "" && strings.ContainsRune("-+#>=", rune(s[0])) {
		s = `\` + s
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) }); i > 0 && (s[i] == '.' || s[i] == ')') {
		s = s[:i] + `\` + s[i:]
	}
	return s
}

// cell is inline text that sits in a table cell.
func cell(s string) string {
	return inline(strings.Join(strings.Fields(s), " "))
}

// inline escapes what markdown would read as markup in running text:
// HTML tags (<view>), emphasis, code, links and table cells. An underscore
// inside a word (user_activity) is no emphasis and stays as it is.
func inline(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch r {
		case '\\', '`', '*', '<', '>', '[', ']', '|':
			b.WriteRune('\\')
		case '_':
			inWord := i > 0 && i+1 < len(rs) && isWord(rs[i-1]) && isWord(rs[i+1])
			if !inWord {
				b.WriteRune('\\')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
