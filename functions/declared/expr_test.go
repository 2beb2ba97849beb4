package declared

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseExprAndEval(t *testing.T) {
	fields := map[string]int64{"qty": 3, "price_cents": 1999, "discount_cents": 500, "big": math.MaxInt64, "small": math.MinInt64, "zero": 0}
	read := func(name string) (int64, error) {
		if v, ok := fields[name]; ok {
			return v, nil
		}
		return 0, fmt.Errorf("no field %s", name)
	}
	cases := []struct {
		name    string
		text    string
		want    int64
		fields  []string
		bare    bool
		wantErr error
	}{
		{name: "a field", text: "qty", want: 3, fields: []string{"qty"}, bare: true},
		{name: "an integer", text: "1", want: 1},
		{name: "a product", text: "qty * price_cents", want: 5997, fields: []string{"qty", "price_cents"}},
		{name: "precedence", text: "1 + qty * 2", want: 7, fields: []string{"qty"}},
		{name: "left to right", text: "10 - 3 - 2", want: 5},
		{name: "parentheses", text: "(price_cents - discount_cents) * qty", want: 4497, fields: []string{"price_cents", "discount_cents", "qty"}},
		{name: "negation", text: "-qty", want: -3, fields: []string{"qty"}},
		{name: "negation of a product", text: "- qty * -2", want: 6, fields: []string{"qty"}},
		{name: "a field named twice is listed once", text: "qty * qty", want: 9, fields: []string{"qty"}},
		{name: "spaces around", text: "  qty  ", want: 3, fields: []string{"qty"}, bare: true},
		{name: "times zero does not overflow", text: "big * zero", want: 0, fields: []string{"big", "zero"}},
		{name: "a sum that overflows", text: "big + 1", wantErr: ErrOverflow, fields: []string{"big"}},
		{name: "a difference that overflows", text: "small - 1", wantErr: ErrOverflow, fields: []string{"small"}},
		{name: "a product that overflows", text: "big * 2", wantErr: ErrOverflow, fields: []string{"big"}},
		{name: "the least integer negated", text: "-small", wantErr: ErrOverflow, fields: []string{"small"}},
		{name: "the least integer times -1", text: "small * -1", wantErr: ErrOverflow, fields: []string{"small"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseExpr(tc.text)
			if err != nil {
				t.Fatalf("ParseExpr(%q): %v", tc.text, err)
			}
			if got := e.Fields(); !slices.Equal(got, tc.fields) {
				t.Errorf("Fields() = %q, want %q", got, tc.fields)
			}
			if _, bare := e.Field(); bare != tc.bare {
				t.Errorf("Field() bare = %v, want %v", bare, tc.bare)
			}
			if e.String() != strings.TrimSpace(tc.text) {
				t.Errorf("String() = %q, want %q", e.String(), strings.TrimSpace(tc.text))
			}
			got, err := e.eval(read)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && got != tc.want) {
				t.Errorf("eval = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseExprRefuses(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{name: "empty", text: "  ", want: "empty"},
		{name: "division", text: "qty / 2", want: `at column 5, found "/"`},
		{name: "a power", text: "qty ** 2", want: `want a field name, an integer or ( at column 6, found "*"`},
		{name: "a call", text: "abs(qty)", want: `want +, -, * or the end at column 4, found "("`},
		{name: "two fields", text: "qty price_cents", want: `want +, -, * or the end at column 5, found "price_cents"`},
		{name: "an unclosed parenthesis", text: "(qty + 1", want: `want ")" at column 9, found the end`},
		{name: "a dangling operator", text: "qty +", want: "want a field name, an integer or ( at column 6, found the end"},
		{name: "a decimal", text: "qty * 1.5", want: `at column 8, found "."`},
		{name: "a dotted field", text: "item.qty", want: `at column 5, found "."`},
		{name: "an integer too large", text: "99999999999999999999", want: "want an integer within"},
		{name: "a quoted string", text: `"qty"`, want: `found "\""`},
		{name: "a non-ASCII character", text: "qté", want: `found "é"`},
		{name: "too long", text: strings.Repeat("1+", 200) + "1", want: "at most 256"},
		{name: "nested too deep", text: strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), want: "at most 32 nested"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseExpr(tc.text)
			if !errors.Is(err, ErrExpr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseExpr(%q) = %v, want ErrExpr containing %q", tc.text, err, tc.want)
			}
		})
	}
}

func TestExprText(t *testing.T) {
	var e Expr
	if err := e.UnmarshalText([]byte("qty * price_cents")); err != nil {
		t.Fatal(err)
	}
	b, _ := e.MarshalText()
	if string(b) != "qty * price_cents" {
		t.Errorf("MarshalText = %q", b)
	}
	if err := e.UnmarshalText(nil); err != nil || !e.IsZero() {
		t.Errorf("empty text: %v, zero %v; want no value", err, e.IsZero())
	}
}
