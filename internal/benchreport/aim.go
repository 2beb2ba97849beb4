package benchreport

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Verdict says whether a figure meets its aim.
type Verdict int

const (
	// NoAim: the figure is context only.
	NoAim Verdict = iota
	// Met: the figure reaches its aim.
	Met
	// Missed: it does not.
	Missed
	// Unjudged: the aim cannot be judged: it does not parse, it is of
	// the ratio and the figure has no limit, or its unit is not the
	// figure's.
	Unjudged
)

// String is how the table shows the verdict.
func (v Verdict) String() string {
	switch v {
	case Met:
		return "yes"
	case Missed:
		return "NO"
	case Unjudged:
		return "?"
	default:
		return "-"
	}
}

// ErrAim is matched by the error ParseAim returns for an aim it cannot read.
var ErrAim = errors.New("unreadable aim")

// Aim is a parsed aim: Op Number Unit, where Unit "x" means the ratio.
type Aim struct {
	Op     string
	Number float64
	Unit   string
}

// OfRatio reports whether the aim is of the figure's ratio to its limit.
func (a Aim) OfRatio() bool { return a.Unit == "x" }

// ParseAim reads an aim such as "<= 8x", ">= 0.9×" or "< 250 ms".
func ParseAim(s string) (Aim, error) {
	rest := strings.TrimSpace(s)
	var a Aim
	for _, op := range []struct{ text, op string }{{"<=", "<="}, {">=", ">="}, {"≤", "<="}, {"≥", ">="}, {"<", "<"}, {">", ">"}} {
		if after, ok := strings.CutPrefix(rest, op.text); ok {
			a.Op, rest = op.op, strings.TrimSpace(after)
			break
		}
	}
	if a.Op == "" {
		return Aim{}, fmt.Errorf("%w %q: it starts with none of <, <=, >, >=", ErrAim, s)
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune("0123456789.eE+-", r) })
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.ParseFloat(rest[:end], 64)
	if err != nil {
		return Aim{}, fmt.Errorf("%w %q: %w", ErrAim, s, err)
	}
	a.Number = n
	a.Unit = strings.TrimSpace(rest[end:])
	if a.Unit == "×" || a.Unit == "X" {
		a.Unit = "x"
	}
	return a, nil
}

// timeUnits are the units Judge converts between, in seconds.
var timeUnits = map[string]float64{"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1, "min": 60}

// Judge says whether f meets its aim.
func Judge(f Figure) Verdict {
	if strings.TrimSpace(f.Aim) == "" {
		return NoAim
	}
	a, err := ParseAim(f.Aim)
	if err != nil {
		return Unjudged
	}
	var got float64
	switch {
	case a.OfRatio():
		if f.Limit == "" && f.LimitValue == 0 {
			return Unjudged
		}
		got = f.Ratio
	case a.Unit == "" || a.Unit == f.Unit:
		got = f.Value
	default:
		from, ok1 := timeUnits[f.Unit]
		to, ok2 := timeUnits[a.Unit]
		if !ok1 || !ok2 {
			return Unjudged
		}
		got = f.Value * from / to
	}
	var ok bool
	switch a.Op {
	case "<":
		ok = got < a.Number
	case "<=":
		ok = got <= a.Number
	case ">":
		ok = got > a.Number
	case ">=":
		ok = got >= a.Number
	}
	if ok {
		return Met
	}
	return Missed
}
