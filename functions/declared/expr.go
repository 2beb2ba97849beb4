package declared

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Expr is a column's value as a manifest writes it: an event field's name
// (qty), an integer (1), or a tiny arithmetic expression over integer
// fields and integers with +, -, * and parentheses (qty * price_cents,
// -amount_cents, (price_cents - discount_cents) * qty). It is parsed here
// and evaluated by a tree walk over int64, never handed to an interpreter:
// a value that overflows is the event's problem, reported like a missing
// field.
//
// The zero Expr is no value (a count needs none).
type Expr struct {
	text string
	root node
}

// ErrExpr is what every error of ParseExpr is (errors.Is).
var ErrExpr = errors.New("not a value expression")

// maxExprLength bounds an expression's text: the tree walk recurses once
// per nesting level.
const maxExprLength = 256

// ParseExpr reads an expression; see Expr for the syntax.
func ParseExpr(text string) (Expr, error) {
	if len(text) > maxExprLength {
		return Expr{}, fmt.Errorf("%w: %d characters, at most %d", ErrExpr, len(text), maxExprLength)
	}
	p := &exprParser{text: text}
	p.next()
	if p.tok.kind == tokEnd {
		return Expr{}, fmt.Errorf("%w: empty: want a field name, an integer or an expression such as qty * price_cents", ErrExpr)
	}
	root := p.sum()
	if p.err == nil && p.tok.kind != tokEnd {
		p.fail("want +, -, * or the end")
	}
	if p.err != nil {
		return Expr{}, p.err
	}
	return Expr{text: strings.TrimSpace(text), root: root}, nil
}

// MustParseExpr is ParseExpr for expressions known to be valid (tests,
// examples); it panics on an error.
func MustParseExpr(text string) Expr {
	e, err := ParseExpr(text)
	if err != nil {
		panic(err)
	}
	return e
}

// String is the expression as written (without surrounding space).
func (e Expr) String() string { return e.text }

// IsZero reports whether the expression is absent.
func (e Expr) IsZero() bool { return e.root == nil }

// Field returns the field's name when the expression is a field and
// nothing else: such a value is read as the column's type (a text, a
// timestamp, a double) instead of as an integer.
func (e Expr) Field() (string, bool) {
	f, ok := e.root.(fieldNode)
	return string(f), ok
}

// Fields lists the fields the expression reads, each once, in order of
// appearance.
func (e Expr) Fields() []string {
	var out []string
	var walk func(node)
	walk = func(n node) {
		switch n := n.(type) {
		case fieldNode:
			for _, f := range out {
				if f == string(n) {
					return
				}
			}
			out = append(out, string(n))
		case negNode:
			walk(n.operand)
		case binaryNode:
			walk(n.left)
			walk(n.right)
		}
	}
	if e.root != nil {
		walk(e.root)
	}
	return out
}

// MarshalText writes the expression as written.
func (e Expr) MarshalText() ([]byte, error) { return []byte(e.text), nil }

// UnmarshalText parses an expression (the empty text is no value).
func (e *Expr) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "" {
		*e = Expr{}
		return nil
	}
	v, err := ParseExpr(string(text))
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// ErrOverflow is what an evaluation that leaves the int64 range returns.
var ErrOverflow = errors.New("overflows a 64-bit integer")

// eval computes the expression, reading each field's integer with field.
func (e Expr) eval(field func(name string) (int64, error)) (int64, error) {
	return e.root.eval(field)
}

type node interface {
	eval(field func(string) (int64, error)) (int64, error)
}

type (
	intNode    int64
	fieldNode  string
	negNode    struct{ operand node }
	binaryNode struct {
		op          byte // '+', '-' or '*'
		left, right node
	}
)

func (n intNode) eval(func(string) (int64, error)) (int64, error) { return int64(n), nil }

func (n fieldNode) eval(field func(string) (int64, error)) (int64, error) { return field(string(n)) }

func (n negNode) eval(field func(string) (int64, error)) (int64, error) {
	v, err := n.operand.eval(field)
	if err != nil {
		return 0, err
	}
	if v == math.MinInt64 {
		return 0, ErrOverflow
	}
	return -v, nil
}

func (n binaryNode) eval(field func(string) (int64, error)) (int64, error) {
	a, err := n.left.eval(field)
	if err != nil {
		return 0, err
	}
	b, err := n.right.eval(field)
	if err != nil {
		return 0, err
	}
	switch n.op {
	case '+':
		if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
			return 0, ErrOverflow
		}
		return a + b, nil
	case '-':
		if (b < 0 && a > math.MaxInt64+b) || (b > 0 && a < math.MinInt64+b) {
			return 0, ErrOverflow
		}
		return a - b, nil
	}
	if a == 0 || b == 0 {
		return 0, nil
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, ErrOverflow
	}
	return p, nil
}

// The parser: recursive descent over
//
//	sum     = product { ("+" | "-") product }
//	product = unary { "*" unary }
//	unary   = "-" unary | primary
//	primary = integer | field | "(" sum ")"
//	field   = letter { letter | digit | "_" }   (letter: a-z, A-Z, _)

type tokKind int

const (
	tokEnd tokKind = iota
	tokInt
	tokField
	tokOp // + - * ( )
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based column
}

type exprParser struct {
	text  string
	pos   int
	tok   token
	depth int
	err   error
}

func (p *exprParser) fail(want string) {
	if p.err != nil {
		return
	}
	found := "the end"
	if p.tok.kind != tokEnd {
		found = strconv.Quote(p.tok.text)
	}
	p.err = fmt.Errorf("%w: %q: %s at column %d, found %s", ErrExpr, strings.TrimSpace(p.text), want, p.tok.pos, found)
}

func (p *exprParser) next() {
	for p.pos < len(p.text) && (p.text[p.pos] == ' ' || p.text[p.pos] == '\t') {
		p.pos++
	}
	start := p.pos
	if p.pos == len(p.text) {
		p.tok = token{kind: tokEnd, pos: start + 1}
		return
	}
	c := p.text[p.pos]
	switch {
	case c >= '0' && c <= '9':
		for p.pos < len(p.text) && isDigit(p.text[p.pos]) {
			p.pos++
		}
		p.tok = token{kind: tokInt, text: p.text[start:p.pos], pos: start + 1}
	case isLetter(c):
		for p.pos < len(p.text) && (isLetter(p.text[p.pos]) || isDigit(p.text[p.pos])) {
			p.pos++
		}
		p.tok = token{kind: tokField, text: p.text[start:p.pos], pos: start + 1}
	case strings.IndexByte("+-*()", c) >= 0:
		p.pos++
		p.tok = token{kind: tokOp, text: string(c), pos: start + 1}
	default:
		r := []rune(p.text[start:])[0]
		p.tok = token{kind: tokOp, text: string(r), pos: start + 1}
		p.pos = len(p.text)
		p.fail("want a field name, an integer, +, -, *, ( or )")
	}
}

func (p *exprParser) isOp(op string) bool { return p.tok.kind == tokOp && p.tok.text == op }

func (p *exprParser) sum() node {
	left := p.product()
	for p.err == nil && (p.isOp("+") || p.isOp("-")) {
		op := p.tok.text[0]
		p.next()
		left = binaryNode{op: op, left: left, right: p.product()}
	}
	return left
}

func (p *exprParser) product() node {
	left := p.unary()
	for p.err == nil && p.isOp("*") {
		p.next()
		left = binaryNode{op: '*', left: left, right: p.unary()}
	}
	return left
}

func (p *exprParser) unary() node {
	if p.isOp("-") {
		p.next()
		return negNode{operand: p.unary()}
	}
	return p.primary()
}

func (p *exprParser) primary() node {
	if p.err != nil {
		return nil
	}
	switch {
	case p.tok.kind == tokInt:
		n, err := strconv.ParseInt(p.tok.text, 10, 64)
		if err != nil {
			p.fail("want an integer within ±9223372036854775807")
			return nil
		}
		p.next()
		return intNode(n)
	case p.tok.kind == tokField:
		name := p.tok.text
		p.next()
		return fieldNode(name)
	case p.isOp("("):
		p.depth++
		if p.depth > 32 {
			p.fail("at most 32 nested parentheses")
			return nil
		}
		p.next()
		inner := p.sum()
		if p.err == nil && !p.isOp(")") {
			p.fail(`want ")"`)
		}
		p.depth--
		p.next()
		return inner
	}
	p.fail("want a field name, an integer or (")
	return nil
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// IsFieldName reports whether name is a field name as expressions and
// filters write them: a letter or _ then letters, digits or _.
func IsFieldName(name string) bool {
	if name == "" || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !isLetter(name[i]) && !isDigit(name[i]) {
			return false
		}
	}
	return true
}
