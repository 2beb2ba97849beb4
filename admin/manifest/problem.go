package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is what every *Problems error is (errors.Is): the manifests
// were read but do not describe a deployable pipeline.
var ErrInvalid = errors.New("manifests are invalid")

// Problem is one thing wrong with a manifest, located at a file, line and
// field.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String is the form editors and CI understand: file:line: field: message.
func (p Problem) String() string {
	field := p.Field
	if field == "" {
		field = "(document)"
	}
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, field, p.Message)
}

// Problems is every problem found, and an error when there is at least one.
type Problems []Problem

// Error lists every problem, one a line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (ps Problems) Is(target error) bool { return target == ErrInvalid }

// Sorted returns the problems by file, line and field, without duplicates.
func (ps Problems) Sorted() Problems {
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Field, b.Field)
	})
	return slices.Compact(out)
}

// Err returns nil without problems, else the sorted problems as an error.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps.Sorted()
}
