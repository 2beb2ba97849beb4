// Package textcap bounds text that comes from data (error messages, dead-letter
// reasons, metric labels) before it reaches a place with a size limit or a
// UTF-8 rule: a message property, a Prometheus label, a protobuf string.
package textcap

import (
	"strconv"
	"strings"
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
