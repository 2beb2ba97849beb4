// Package viewscan reads a whole view table once to count its live rows and
// find its newest event time, for `foldline views` and `foldline status`.
// A full scan suits the sizes of a demo and of tests; Cassandra keeps no
// row count, and the sink's tombstone rows (fl_deleted) must not count.
package viewscan

import (
	"fmt"
	"strings"
	"time"

	"context"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/sinks/cassandra"
)

// Summary is what a scan found.
type Summary struct {
	// Rows counts the live rows (deleted ones are kept as tombstones).
	Rows int64
	// NewestEvent is the latest event time in the table: the greatest value
	// of its timestamp columns and of the event times the sink records for
	// "latest" columns. Zero when the view has neither.
	NewestEvent time.Time
}

// Scan reads every row of the schema's table.
func Scan(ctx context.Context, session *gocql.Session, schema cassandra.ViewSchema) (Summary, error) {
	cols := []string{cqlname.Quote(cassandra.ColumnDeleted), cqlname.Quote(cassandra.ColumnLatestAt)}
	var timeCols int
	for _, c := range schema.Columns {
		if strings.EqualFold(c.Type, "timestamp") {
			cols = append(cols, cqlname.Quote(c.Name))
			timeCols++
		}
	}
	q := fmt.Sprintf("SELECT %s FROM %s", strings.Join(cols, ", "), cqlname.Table(schema.Keyspace, schema.Table))
	iter := session.Query(q).WithContext(ctx).PageSize(5000).Iter()
	var sum Summary
	var deleted bool
	latestAt := map[string]int64{}
	times := make([]time.Time, timeCols)
	dest := []any{&deleted, &latestAt}
	for i := range times {
		dest = append(dest, &times[i])
	}
	for iter.Scan(dest...) {
		if deleted {
			continue
		}
		sum.Rows++
		for _, t := range times {
			if t.After(sum.NewestEvent) {
				sum.NewestEvent = t
			}
		}
		for _, ns := range latestAt {
			if t := time.Unix(0, ns).UTC(); t.After(sum.NewestEvent) {
				sum.NewestEvent = t
			}
		}
		clear(latestAt)
		deleted = false
	}
	if err := iter.Close(); err != nil {
		return Summary{}, fmt.Errorf("scanning table %s.%s: %w", schema.Keyspace, schema.Table, err)
	}
	return sum, nil
}
