package backfill

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/internal/textcap"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Diff is how the new table of a backfill differs from the old one.
type Diff = backfillrecord.Diff

// maxExamples bounds Diff.Examples.
const maxExamples = 5

// compareRows diffs two tables read by readRows.
func compareRows(old, new map[string]string) *Diff {
	d := &Diff{OldRows: len(old), NewRows: len(new)}
	example := func(format string, args ...any) {
		if len(d.Examples) < maxExamples {
			// The rows are the events': escaped for the terminal that
			// prints them (textcap.Line).
			d.Examples = append(d.Examples, textcap.Line(fmt.Sprintf(format, args...)))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(old)) {
		n, ok := new[key]
		switch {
		case !ok:
			d.OnlyOld++
			example("only in old: %s %s", key, old[key])
		case n != old[key]:
			d.Differing++
			example("differs: %s old %s new %s", key, old[key], n)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(new)) {
		if _, ok := old[key]; !ok {
			d.OnlyNew++
			example("only in new: %s %s", key, new[key])
		}
	}
	return d
}

// compareTables reads both tables whole (a view is as big as its keys,
// not its history) and diffs them over the columns of the new definition
// that the old one has too, row by row: by key, and by tile as well when
// both are windowed.
func compareTables(ctx context.Context, cql *gocql.Session, oldSchema, newSchema cassandra.ViewSchema) (*Diff, error) {
	shared := map[string]bool{}
	for _, c := range oldSchema.Columns {
		shared[c.Name] = true
	}
	var keys, cols []string
	for _, k := range newSchema.Key {
		keys = append(keys, k.Name)
	}
	if newSchema.Windowed() && oldSchema.Windowed() {
		// One row per entity and tile: compare each tile, not one of them.
		keys = append(keys, cassandra.ColumnTile)
	}
	for _, c := range newSchema.Columns {
		if shared[c.Name] {
			cols = append(cols, c.Name)
		}
	}
	old, err := readRows(ctx, cql, oldSchema.Keyspace, oldSchema.Table, keys, cols)
	if err != nil {
		return nil, err
	}
	new, err := readRows(ctx, cql, newSchema.Keyspace, newSchema.Table, keys, cols)
	if err != nil {
		return nil, err
	}
	return compareRows(old, new), nil
}

// readRows maps each live row's key (k=v,…) to its values (c=v,…).
func readRows(ctx context.Context, cql *gocql.Session, keyspace, table string, keys, cols []string) (map[string]string, error) {
	quoted := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = cqlname.Quote(n)
		}
		return out
	}
	all := append(append(quoted(keys), quoted(cols)...), cqlname.Quote(cassandra.ColumnDeleted))
	q := fmt.Sprintf("SELECT %s FROM %s", strings.Join(all, ", "), cqlname.Table(keyspace, table))
	iter := cql.Query(q).WithContext(ctx).PageSize(5000).Iter()
	rows := map[string]string{}
	for {
		row := map[string]any{}
		if !iter.MapScan(row) {
			break
		}
		if deleted, _ := row[cassandra.ColumnDeleted].(bool); deleted {
			continue
		}
		rows[render(row, keys)] = render(row, cols)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading table %s.%s: %w", keyspace, table, err)
	}
	return rows, nil
}

func render(row map[string]any, names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%v", n, row[n])
	}
	return strings.Join(parts, ",")
}
