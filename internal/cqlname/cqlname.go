// Package cqlname checks and quotes the names Foldline puts into CQL text:
// keyspaces, tables and columns. Every statement built with fmt goes through
// Quote, so that no name — from a manifest, a flag or a sink's user config —
// can end a quoted identifier and add CQL of its own; Check refuses a name
// outside the one form Foldline creates, so that quoting changes nothing
// and the name reads the same unquoted in cqlsh.
package cqlname

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalid is what every *Error is (errors.Is).
var ErrInvalid = errors.New("not a valid CQL name")

// MaxLength is the longest name Cassandra takes for a keyspace or table.
const MaxLength = 48

// pattern is the form of every name Foldline creates: lower case, so that
// quoted and unquoted spellings are the same name.
var pattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Error is a name that Check refused.
type Error struct {
	// What the name names: "keyspace", "table", "column", …
	Kind string
	Name string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %q: want lower-case letters, digits and _, starting with a letter, at most %d characters", e.Kind, e.Name, MaxLength)
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Check returns an *Error when name is not a lower-case CQL identifier of
// at most MaxLength characters; kind says what it names, for the message.
func Check(kind, name string) error {
	if len(name) > MaxLength || !pattern.MatchString(name) {
		return &Error{Kind: kind, Name: name}
	}
	return nil
}

// Quote returns name as a quoted CQL identifier: in double quotes, with
// every double quote inside doubled (CQL's escape, which Go's %q is not).
func Quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Table returns keyspace.table with both parts quoted.
func Table(keyspace, table string) string { return Quote(keyspace) + "." + Quote(table) }
