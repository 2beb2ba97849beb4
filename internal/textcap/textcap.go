// Package textcap bounds text that comes from data (error messages, dead-letter
// reasons, metric labels) before it reaches a place with a size limit or a
// UTF-8 rule: a message property, a Prometheus label, a protobuf string; and
// makes it harmless to print on a terminal (Line, Lines).
package textcap

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Truncate returns s as valid UTF-8 (each invalid byte sequence becomes
// U+FFFD) of at most limit bytes. A text that had to be cut ends with a marker
// that says so and how long the original was, and is cut on a rune
// boundary; limit is raised to fit the marker.
func Truncate(s string, limit int) string {
	if len(s) <= limit && utf8.ValidString(s) {
		return s
	}
	valid := strings.ToValidUTF8(s, "\uFFFD")
	if len(valid) <= limit {
		return valid
	}
	marker := "… [truncated from " + strconv.Itoa(len(s)) + " bytes]"
	keep := max(limit-len(marker), 0)
	for keep > 0 && !utf8.RuneStart(valid[keep]) {
		keep--
	}
	return valid[:keep] + marker
}

// Line returns s as text that prints as one line on a terminal and does
// nothing else there: every rune that is not printable (an escape that
// would move the cursor, recolour or retitle the terminal, a carriage
// return or newline that would forge a line of output, a bidirectional
// override that would reorder what is shown) is written as its Go escape
// (\x1b, \n, \u202e), and each byte of invalid UTF-8 as \xNN. Text from
// events, manifests or a tenant's process goes through it before a command
// prints it.
func Line(s string) string { return terminal(s, false) }

// Lines is Line for text of several lines: newlines and tabs are kept.
func Lines(s string) string { return terminal(s, true) }

func terminal(s string, lines bool) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case lines && (r == '\n' || r == '\t'), unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
