package jsonwire

import "testing"

// names are strings as view operations and shop events hold them.
var names = []string{"user_activity", "page_views", "add", "last_seen", "/p/sku-17", "u123", "e-104233", "apply"}

func BenchmarkAppendString(b *testing.B) {
	buf := make([]byte, 0, 64)
	for b.Loop() {
		for _, s := range names {
			buf = AppendString(buf[:0], s)
		}
	}
}

func BenchmarkReadString(b *testing.B) {
	var toks [][]byte
	for _, s := range names {
		toks = append(toks, AppendString(nil, s))
	}
	for b.Loop() {
		for _, t := range toks {
			r := NewReader(t)
			r.String()
		}
	}
}
