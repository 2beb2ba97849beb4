package cassandra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/internal/cqlname"
)

// Bookkeeping columns that every view table carries next to its own. Their
// prefix is reserved: a view column may not start with it.
const (
	reservedPrefix = "fl_"
	// ColumnApplied maps each origin topic (ledger partition) to the last
	// position applied to the row, as envelope.Position.String.
	ColumnApplied = "fl_applied"
	// ColumnDeleted is true for a deleted row: it stays as a tombstone that
	// remembers ColumnApplied, so a redelivered older upsert cannot bring it
	// back. Readers skip rows where it is true; it is null for a row never
	// deleted (the sink writes it only when it changes), false for one
	// written again after a delete.
	ColumnDeleted = "fl_deleted"
	// ColumnLatestAt maps each column with merge "latest" to the event time
	// of its current value, in Unix nanoseconds: a CQL timestamp keeps only
	// milliseconds, too coarse to order events exactly.
	ColumnLatestAt = "fl_latest_at"
)

var bookkeepingTypes = map[string]string{
	ColumnApplied:  "map<text, text>",
	ColumnDeleted:  "boolean",
	ColumnLatestAt: "map<text, bigint>",
}

// ErrSchemaMismatch is returned (wrapped in a *SchemaMismatchError) when the
// keyspace or table exists with a definition other than the view's. The sink
// never alters a table: a new definition needs a new table version.
var ErrSchemaMismatch = errors.New("existing schema differs from the view definition")

// SchemaMismatchError lists every difference between the existing keyspace or
// table and the view definition.
type SchemaMismatchError struct {
	// Object is "keyspace shop" or "table shop.user_activity_v1".
	Object      string
	Differences []string
}

func (e *SchemaMismatchError) Error() string {
	return fmt.Sprintf("%s exists and differs from the view definition (the sink never alters it; deploy a new table version or drop it): %s",
		e.Object, strings.Join(e.Differences, "; "))
}

// Is makes errors.Is(err, ErrSchemaMismatch) hold.
func (e *SchemaMismatchError) Is(target error) bool { return target == ErrSchemaMismatch }

// ViewSchema is a view's table definition: the part of a view manifest the
// sink needs, as it arrives in the sink's user config. The admin tool reuses
// it to create and check tables.
type ViewSchema struct {
	// Keyspace is the tenant's keyspace, e.g. "shop".
	Keyspace string `json:"keyspace" yaml:"keyspace"`
	// Table is the view's table version, e.g. "user_activity_v1".
	Table string `json:"table" yaml:"table"`
	// View is the view name that operations carry in ViewOp.View.
	View string `json:"view" yaml:"view"`
	// Key lists the key columns in partition-key order.
	Key []KeyColumn `json:"key" yaml:"key"`
	// Columns lists the value columns and their merge rules.
	Columns []ValueColumn `json:"columns" yaml:"columns"`
	// Hop is the tile size of a windowed view (see Window): every windowed
	// column of the view shares it. Zero for a view without windows.
	Hop Span `json:"hop,omitempty" yaml:"hop"`
	// Averages are columns that reads compute from two of Columns, a sum
	// and a count (see Average): the table has none of them.
	Averages []Average `json:"averages,omitempty" yaml:"averages"`
}

// KeyColumn is one column of a view's key.
type KeyColumn struct {
	Name string `json:"name" yaml:"name"`
	// Type is a CQL type name, e.g. "text".
	Type string `json:"type" yaml:"type"`
	// Description says what the column holds, for the view catalog
	// (foldline views describe); the sink never sees it.
	Description string `json:"-" yaml:"description"`
}

// ValueColumn is one value column of a view.
type ValueColumn struct {
	Name string `json:"name" yaml:"name"`
	// Type is a CQL type name, e.g. "bigint".
	Type string `json:"type" yaml:"type"`
	// Merge is the rule that folds an operation's value into the column.
	Merge envelope.Merge `json:"merge" yaml:"merge"`
	// Window makes the column aggregate over the events of a sliding
	// event-time window of this length instead of all time (see window.go
	// for the exact semantics). A view's columns have a window each or none.
	Window Span `json:"window,omitempty" yaml:"window"`
	// Description says what the column holds, for the view catalog
	// (foldline views describe); the sink never sees it.
	Description string `json:"-" yaml:"description"`
}

// Validate returns every problem of the definition at once.
func (s ViewSchema) Validate() error {
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	checkName := func(field, name string) {
		if err := cqlname.Check(field, name); err != nil {
			errs = append(errs, err)
		}
	}
	checkName("keyspace", s.Keyspace)
	checkName("table", s.Table)
	if s.View == "" {
		problem("view: is empty")
	}
	if len(s.Key) == 0 {
		problem("key: needs at least one column")
	}
	if len(s.Columns) == 0 {
		problem("columns: needs at least one column")
	}
	seen := map[string]bool{}
	checkColumn := func(field, name, typ string) *cqlType {
		checkName(field+".name", name)
		if strings.HasPrefix(name, reservedPrefix) {
			problem("%s.name %q: the prefix %s is reserved for the sink's bookkeeping", field, name, reservedPrefix)
		}
		if seen[name] {
			problem("%s.name %q: column defined twice", field, name)
		}
		seen[name] = true
		t, ok := lookupType(typ)
		if !ok {
			problem("%s.type %q: not one of %s", field, typ, supportedTypes())
		}
		return t
	}
	for i, k := range s.Key {
		checkColumn(fmt.Sprintf("key[%d]", i), k.Name, k.Type)
	}
	for i, c := range s.Columns {
		field := fmt.Sprintf("columns[%d]", i)
		t := checkColumn(field, c.Name, c.Type)
		if !c.Merge.Valid() {
			problem("%s.merge %q: not one of set, add, max, min, latest", field, c.Merge)
		} else if c.Merge == envelope.MergeAdd && t != nil && !t.numeric() {
			problem("%s.merge add: column type %s is not numeric", field, c.Type)
		}
	}
	s.validateWindows(problem)
	s.validateAverages(problem, seen)
	return errors.Join(errs...)
}

// Replication is a keyspace's replication map as CQL takes it, e.g.
// {"class": "SimpleStrategy", "replication_factor": "1"}.
type Replication map[string]string

// DefaultReplication suits a single-node Cassandra.
func DefaultReplication() Replication {
	return Replication{"class": "SimpleStrategy", "replication_factor": "1"}
}

// Validate checks that the map names a strategy.
func (r Replication) Validate() error {
	if r["class"] == "" {
		return fmt.Errorf("replication: class is missing")
	}
	return nil
}

func (r Replication) cql() string {
	keys := slices.Sorted(maps.Keys(r))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("'%s': '%s'", strings.ReplaceAll(k, "'", "''"), strings.ReplaceAll(r[k], "'", "''")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// normalized drops the package prefix Cassandra adds to strategy classes.
func (r Replication) normalized() Replication {
	out := Replication{}
	for k, v := range r {
		if k == "class" {
			v = strings.TrimPrefix(v, "org.apache.cassandra.locator.")
		}
		out[k] = v
	}
	return out
}

// KeyspaceCQL is the statement that creates the keyspace if it is absent.
func (s ViewSchema) KeyspaceCQL(r Replication) string {
	return fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s", quote(s.Keyspace), r.cql())
}

// TableCQL is the statement that creates the view's table if it is absent.
func (s ViewSchema) TableCQL() string {
	var cols, keys []string
	for _, k := range s.StorageKey() {
		cols = append(cols, quote(k.Name)+" "+canonicalType(k.Type))
		keys = append(keys, quote(k.Name))
	}
	for _, c := range s.Columns {
		cols = append(cols, quote(c.Name)+" "+canonicalType(c.Type))
	}
	for _, name := range []string{ColumnApplied, ColumnDeleted, ColumnLatestAt} {
		cols = append(cols, quote(name)+" "+bookkeepingTypes[name])
	}
	if s.Windowed() {
		// The entity's tiles share its partition, newest first: a window's
		// read is one slice of one partition.
		return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s, PRIMARY KEY ((%s), %s)) WITH CLUSTERING ORDER BY (%s DESC)",
			s.qualifiedTable(), strings.Join(cols, ", "), strings.Join(keys[:len(s.Key)], ", "), quote(ColumnTile), quote(ColumnTile))
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s, PRIMARY KEY ((%s)))",
		s.qualifiedTable(), strings.Join(cols, ", "), strings.Join(keys, ", "))
}

func (s ViewSchema) qualifiedTable() string { return cqlname.Table(s.Keyspace, s.Table) }

// quote is every CQL name the sink puts into a statement, quoted with
// cqlname (double quotes doubled).
func quote(name string) string { return cqlname.Quote(name) }

// canonicalType is the type name system_schema reports for a CQL type.
func canonicalType(name string) string {
	if t, ok := lookupType(name); ok {
		return t.name
	}
	return strings.ToLower(name)
}

// EnsureSchema creates the view's keyspace and table when absent and checks
// them when present. A keyspace or table that exists with another definition
// gives a *SchemaMismatchError listing every difference; nothing is altered.
func EnsureSchema(ctx context.Context, session *gocql.Session, s ViewSchema, r Replication) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("validating view %s: %w", s.View, err)
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("validating keyspace %s: %w", s.Keyspace, err)
	}
	if err := ensureKeyspace(ctx, session, s, r); err != nil {
		return err
	}
	if err := session.Query(s.TableCQL()).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating table %s.%s: %w", s.Keyspace, s.Table, err)
	}
	if err := session.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("waiting for schema agreement on %s.%s: %w", s.Keyspace, s.Table, err)
	}
	existing, err := readColumns(ctx, session, s.Keyspace, s.Table)
	if err != nil {
		return err
	}
	if diffs := tableDifferences(s, existing); len(diffs) > 0 {
		return &SchemaMismatchError{Object: "table " + s.Keyspace + "." + s.Table, Differences: diffs}
	}
	return nil
}

func ensureKeyspace(ctx context.Context, session *gocql.Session, s ViewSchema, r Replication) error {
	var existing map[string]string
	err := session.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, s.Keyspace).
		WithContext(ctx).Scan(&existing)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		if err := session.Query(s.KeyspaceCQL(r)).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("creating keyspace %s: %w", s.Keyspace, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading keyspace %s: %w", s.Keyspace, err)
	}
	have, want := Replication(existing).normalized(), r.normalized()
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("replication %s is %q, the definition wants %q", k, have[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("replication %s is %q, the definition has none", k, have[k]))
		}
	}
	if len(diffs) > 0 {
		return &SchemaMismatchError{Object: "keyspace " + s.Keyspace, Differences: diffs}
	}
	return nil
}

// existingColumn is one row of system_schema.columns.
type existingColumn struct {
	Kind     string // partition_key, clustering or regular
	Position int
	Type     string
}

func readColumns(ctx context.Context, session *gocql.Session, keyspace, table string) (map[string]existingColumn, error) {
	iter := session.Query(`SELECT column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
		keyspace, table).WithContext(ctx).Iter()
	cols := map[string]existingColumn{}
	var name string
	var c existingColumn
	for iter.Scan(&name, &c.Kind, &c.Position, &c.Type) {
		cols[name] = c
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading columns of table %s.%s: %w", keyspace, table, err)
	}
	return cols, nil
}

// tableDifferences compares a table's columns with what the view needs.
func tableDifferences(s ViewSchema, existing map[string]existingColumn) []string {
	want := map[string]existingColumn{}
	for i, k := range s.Key {
		want[k.Name] = existingColumn{Kind: "partition_key", Position: i, Type: canonicalType(k.Type)}
	}
	if s.Windowed() {
		want[ColumnTile] = existingColumn{Kind: "clustering", Position: 0, Type: "timestamp"}
	}
	for _, c := range s.Columns {
		want[c.Name] = existingColumn{Kind: "regular", Position: -1, Type: canonicalType(c.Type)}
	}
	for name, typ := range bookkeepingTypes {
		want[name] = existingColumn{Kind: "regular", Position: -1, Type: typ}
	}
	var diffs []string
	for name, w := range want {
		h, ok := existing[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("column %s %s is missing", name, w.Type))
		case h.Type != w.Type:
			diffs = append(diffs, fmt.Sprintf("column %s has type %s, the definition wants %s", name, h.Type, w.Type))
		case h.Kind != w.Kind:
			diffs = append(diffs, fmt.Sprintf("column %s is a %s column, the definition wants %s", name, kindName(h.Kind), kindName(w.Kind)))
		case w.Kind != "regular" && h.Position != w.Position:
			diffs = append(diffs, fmt.Sprintf("key column %s is at position %d, the definition wants %d", name, h.Position, w.Position))
		}
	}
	for name, h := range existing {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("column %s %s (%s) is not in the definition", name, h.Type, kindName(h.Kind)))
		}
	}
	sort.Strings(diffs)
	return diffs
}

func kindName(kind string) string {
	switch kind {
	case "partition_key":
		return "partition key"
	case "clustering":
		return "clustering key"
	}
	return "value"
}
