package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gocql/gocql"
)

// StateBuilding is the state a view registry gives a table version that a
// backfill is filling and nobody reads yet.
const StateBuilding = "building"

// RegistryWatch follows the state of the sink's table in a view registry
// (Settings.Registry): a table in the view's keyspace with one row per
// table version, keyed by view_name and table_name, with its state.
type RegistryWatch struct {
	Session  *gocql.Session
	Keyspace string
	Registry string
	View     string
	Table    string
}

// StateCQL is the query that reads the state of one table version.
func (w RegistryWatch) StateCQL() string {
	return fmt.Sprintf(`SELECT state FROM %s.%s WHERE view_name = ? AND table_name = ?`, quote(w.Keyspace), quote(w.Registry))
}

// Building reads whether the registry lists the table as building. A
// registry or a row that does not exist means live.
func (w RegistryWatch) Building(ctx context.Context) (bool, error) {
	var state string
	err := w.Session.Query(w.StateCQL(), w.View, w.Table).WithContext(ctx).Consistency(gocql.One).Scan(&state)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the state of %s.%s in the registry %s.%s: %w", w.Keyspace, w.Table, w.Keyspace, w.Registry, err)
	}
	return state == StateBuilding, nil
}

// Run calls set whenever the table's state changes (the sink starts live),
// reading it now and every poll until ctx ends. While the registry cannot be
// read the last state stands, so a sink whose registry was never created
// stays live.
func (w RegistryWatch) Run(ctx context.Context, poll time.Duration, set func(building bool)) {
	building, warned := false, false
	for {
		b, err := w.Building(ctx)
		switch {
		case err != nil && !warned:
			slog.Info("cannot read the view registry; keeping the batches as they are", "error", err)
			warned = true
		case err == nil && b != building:
			slog.Info("table state in the view registry", "table", w.Keyspace+"."+w.Table, "building", b)
			building = b
			set(b)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
}
