package cqlname_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/foldline/foldline/internal/cqlname"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name, value string
		ok          bool
	}{
		{name: "plain", value: "shop", ok: true},
		{name: "underscore and digits", value: "e2e_fold_123", ok: true},
		{name: "longest", value: "a" + strings.Repeat("b", 47), ok: true},
		{name: "too long", value: "a" + strings.Repeat("b", 48)},
		{name: "empty", value: ""},
		{name: "upper case", value: "Shop"},
		{name: "leading digit", value: "1shop"},
		{name: "quote", value: `a"b`},
		{name: "statement", value: `x"; DROP KEYSPACE shop; --`},
		{name: "dot", value: "a.b"},
		{name: "dash", value: "a-b"},
		{name: "space", value: "a b"},
		{name: "newline", value: "a\nb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cqlname.Check("keyspace", tc.value)
			if tc.ok != (err == nil) {
				t.Fatalf("Check(%q) = %v, want ok %v", tc.value, err, tc.ok)
			}
			if err != nil && !errors.Is(err, cqlname.ErrInvalid) {
				t.Errorf("Check(%q) = %v, want errors.Is ErrInvalid", tc.value, err)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{name: "plain", in: "shop", want: `"shop"`},
		{name: "quote doubled", in: `a"b`, want: `"a""b"`},
		{name: "breaking out", in: `x"; DROP KEYSPACE shop; --`, want: `"x""; DROP KEYSPACE shop; --"`},
		// Go's %q would escape these the Go way (\" and \\), which CQL
		// reads differently.
		{name: "backslash kept", in: `a\"b`, want: `"a\""b"`},
		{name: "empty", in: "", want: `""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := cqlname.Quote(tc.in); got != tc.want {
				t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func ExampleTable() {
	fmt.Println(cqlname.Table("shop", `evil"table`))
	// Output: "shop"."evil""table"
}
