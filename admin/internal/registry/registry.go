// Package registry is the view registry: a table in each tenant keyspace,
// foldline_views, that says which table version of each view is active.
// Deploy registers a view's table; `foldline views` and CQL users read the
// active one from here; a backfill (a new table version built next to the
// live one) switches it. One partition per view, with the active table in a
// static column, makes the switch one single-partition write: atomic and
// isolated, so a reader sees the old table or the new one, never neither.
package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlname"
)

// Table is the registry's table name in every tenant keyspace.
const Table = "foldline_views"

// The states of a table version.
const (
	// StateActive: the table readers use.
	StateActive = "active"
	// StateBuilding: a new version being filled (backfill), not yet active.
	StateBuilding = "building"
	// StateRetired: a former active version kept for rollback.
	StateRetired = "retired"
	// StateSnapshot: the view as it was at a point of the ledger (a replay,
	// foldline backfill --until); complete, and follows nothing.
	StateSnapshot = "snapshot"
	// StateAborting: a version a backfill was building, which foldline
	// backfill --abort is removing: it can no longer be switched to
	// (MarkAborting, Switch).
	StateAborting = "aborting"
)

// Version is one table version of a view.
type Version struct {
	Table string
	State string
	// Definition is the table definition (the sink's ViewSchema) as JSON.
	Definition string
	CreatedAt  time.Time
}

// Entry is one view's registration.
type Entry struct {
	View string
	// ActiveTable is the table readers use, "" while no version is active.
	ActiveTable string
	Versions    []Version
}

// CreateCQL is the statement that creates the registry in keyspace.
func CreateCQL(keyspace string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  view_name text,
  table_name text,
  active_table text STATIC,
  state text,
  definition text,
  created_at timestamp,
  PRIMARY KEY ((view_name), table_name))`, cqlname.Table(keyspace, Table))
}

// Ensure creates the registry table and its history (HistoryTable) when
// absent.
func Ensure(ctx context.Context, s *gocql.Session, keyspace string) error {
	if err := s.Query(CreateCQL(keyspace)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating view registry %s.%s: %w", keyspace, Table, err)
	}
	if err := s.Query(HistoryCQL(keyspace)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating view history %s.%s: %w", keyspace, HistoryTable, err)
	}
	return nil
}

// Exists reports whether keyspace has a registry.
func Exists(ctx context.Context, s *gocql.Session, keyspace string) (bool, error) {
	var name string
	err := s.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, keyspace, Table).
		WithContext(ctx).Scan(&name)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up view registry %s.%s: %w", keyspace, Table, err)
	}
	return true, nil
}

// Register records table as a version of view. The first version of a view
// becomes active; a later one is recorded as building and leaves the active
// table alone (a backfill switches it when the new table has caught up).
// Registering a known version changes nothing.
func Register(ctx context.Context, s *gocql.Session, keyspace, view, table, definition string) (Entry, error) {
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return Entry{}, err
	}
	for _, v := range entry.Versions {
		if v.Table == table {
			return entry, nil
		}
	}
	state := StateBuilding
	if entry.ActiveTable == "" {
		state = StateActive
	}
	q := fmt.Sprintf(`UPDATE %s SET state = ?, definition = ?, created_at = ? WHERE view_name = ? AND table_name = ?`, cqlname.Table(keyspace, Table))
	args := []any{state, definition, time.Now(), view, table}
	if state == StateActive {
		q = fmt.Sprintf(`UPDATE %s SET active_table = ?, state = ?, definition = ?, created_at = ? WHERE view_name = ? AND table_name = ?`, cqlname.Table(keyspace, Table))
		args = append([]any{table}, args...)
	}
	if err := s.Query(q, args...).WithContext(ctx).Exec(); err != nil {
		return Entry{}, fmt.Errorf("registering table %s of view %s: %w", table, view, err)
	}
	return Get(ctx, s, keyspace, view)
}

// Get returns one view's registration; a view never registered has no
// versions.
func Get(ctx context.Context, s *gocql.Session, keyspace, view string) (Entry, error) {
	entries, err := list(ctx, s, keyspace, view)
	if err != nil || len(entries) == 0 {
		return Entry{View: view}, err
	}
	return entries[0], nil
}

// List returns every registered view of keyspace, by view name.
func List(ctx context.Context, s *gocql.Session, keyspace string) ([]Entry, error) {
	return list(ctx, s, keyspace, "")
}

func list(ctx context.Context, s *gocql.Session, keyspace, view string) ([]Entry, error) {
	q := fmt.Sprintf(`SELECT view_name, table_name, active_table, state, definition, created_at FROM %s`, cqlname.Table(keyspace, Table))
	var args []any
	if view != "" {
		q += ` WHERE view_name = ?`
		args = append(args, view)
	}
	iter := s.Query(q, args...).WithContext(ctx).Iter()
	var entries []Entry
	var (
		name, table, active, state, definition string
		created                                time.Time
	)
	for iter.Scan(&name, &table, &active, &state, &definition, &created) {
		if len(entries) == 0 || entries[len(entries)-1].View != name {
			entries = append(entries, Entry{View: name, ActiveTable: active})
		}
		e := &entries[len(entries)-1]
		e.Versions = append(e.Versions, Version{Table: table, State: state, Definition: definition, CreatedAt: created})
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading view registry %s.%s: %w", keyspace, Table, err)
	}
	return entries, nil
}

// Remove forgets view entirely (its tables are the caller's to drop).
func Remove(ctx context.Context, s *gocql.Session, keyspace, view string) error {
	q := fmt.Sprintf(`DELETE FROM %s WHERE view_name = ?`, cqlname.Table(keyspace, Table))
	if err := s.Query(q, view).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("removing view %s from the registry: %w", view, err)
	}
	return forgetHistory(ctx, s, keyspace, view, "")
}

// RegisterBuilding records table as a version of view in state building,
// whatever the view's other versions: a backfill fills it before any reader
// may use it, even for a view that has no active table yet. Registering a
// known version changes nothing.
func RegisterBuilding(ctx context.Context, s *gocql.Session, keyspace, view, table, definition string) error {
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return err
	}
	for _, v := range entry.Versions {
		if v.Table == table {
			return nil
		}
	}
	q := fmt.Sprintf(`UPDATE %s SET state = ?, definition = ?, created_at = ? WHERE view_name = ? AND table_name = ?`, cqlname.Table(keyspace, Table))
	if err := s.Query(q, StateBuilding, definition, time.Now(), view, table).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("registering table %s of view %s as building: %w", table, view, err)
	}
	return nil
}

// MarkSnapshot records table, a version of view that a replay has filled
// as of a point of the ledger, as a snapshot. The active table is not
// touched. Only a table in state building (or a snapshot already) becomes
// one: a compare-and-set serialized with MarkAborting's.
//
// A timeout or an unavailable replica is retried (markSnapshotAttempts, with
// backoff): by then the replay's functions are gone, and giving up would
// strand a filled table as building. The compare-and-set is idempotent: a
// first attempt that did apply leaves the state snapshot, which the next
// one accepts.
func MarkSnapshot(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	q := fmt.Sprintf(`UPDATE %s SET state = ? WHERE view_name = ? AND table_name = ? IF state IN (?, ?)`, cqlname.Table(keyspace, Table))
	var (
		current map[string]any
		applied bool
		err     error
	)
	wait := markSnapshotBackoff
	for attempt := 1; ; attempt++ {
		current = map[string]any{}
		applied, err = s.Query(q, StateSnapshot, view, table, StateBuilding, StateSnapshot).WithContext(ctx).MapScanCAS(current)
		if err == nil || !transient(err) || attempt == markSnapshotAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("registering table %s of view %s as a snapshot: %w (last error: %w)", table, view, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait *= 2
	}
	if err != nil {
		return fmt.Errorf("registering table %s of view %s as a snapshot: %w", table, view, err)
	}
	if !applied {
		if state, _ := current["state"].(string); state == StateAborting {
			return fmt.Errorf("registering table %s of view %s as a snapshot: %w", table, view, ErrAborting)
		}
		return fmt.Errorf("registering table %s of view %s as a snapshot: %w", table, view, ErrUnknownTable)
	}
	return nil
}

// markSnapshotAttempts and markSnapshotBackoff bound MarkSnapshot's retries:
// 6 attempts, 0.5 s to 8 s apart, half a minute in all, longer than a
// Cassandra restart takes to answer again.
const (
	markSnapshotAttempts = 6
	markSnapshotBackoff  = 500 * time.Millisecond
)

// transient reports whether err is one a retry may cure: a timeout, an
// unavailable or overloaded replica, a compare-and-set whose outcome is
// unknown, no connection.
func transient(err error) bool {
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeWriteTimeout,
			gocql.ErrCodeReadTimeout, gocql.ErrCodeCASWriteUnknown:
			return true
		}
		return false
	}
	return errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.Is(err, gocql.ErrNoConnections) ||
		errors.Is(err, gocql.ErrConnectionClosed)
}

// ErrUnknownTable is the error for a table the registry does not list.
var ErrUnknownTable = errors.New("table not registered")

// ErrAborting is the error for switching to a table whose backfill is being
// aborted.
var ErrAborting = errors.New("its backfill is being aborted")

// Switch is a backfill's switch of view to table, the version it built:
// Activate, but only from state building, as one lightweight transaction
// on the view's partition. MarkAborting takes the table out of building in
// the same way, so of a switch and an abort racing each other exactly one
// wins: either the view reads the table and the abort is refused
// (ErrActiveTable) before it removes anything, or the abort marked it first
// and the switch is refused (ErrAborting) — never a view reading a table
// whose functions the abort is deleting. Switching to the table already
// active changes nothing (a switch completed again).
func Switch(ctx context.Context, s *gocql.Session, keyspace, view, table string) (string, error) {
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return "", err
	}
	if entry.ActiveTable == table {
		return table, nil
	}
	b := s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	b.Query(fmt.Sprintf(`UPDATE %s SET active_table = ?, state = ? WHERE view_name = ? AND table_name = ? IF state = ?`, cqlname.Table(keyspace, Table)),
		table, StateActive, view, table, StateBuilding)
	if entry.ActiveTable != "" {
		b.Query(fmt.Sprintf(`UPDATE %s SET state = ? WHERE view_name = ? AND table_name = ?`, cqlname.Table(keyspace, Table)),
			StateRetired, view, entry.ActiveTable)
	}
	applied, iter, err := s.ExecuteBatchCAS(b)
	if iter != nil {
		_ = iter.Close()
	}
	if err != nil {
		return "", fmt.Errorf("switching view %s to table %s: %w", view, table, err)
	}
	if applied {
		return entry.ActiveTable, nil
	}
	now, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return "", err
	}
	if now.ActiveTable == table {
		return entry.ActiveTable, nil // switched meanwhile, by another watch
	}
	for _, v := range now.Versions {
		if v.Table == table {
			if v.State == StateAborting {
				return "", fmt.Errorf("switching view %s to table %s: %w", view, table, ErrAborting)
			}
			return "", fmt.Errorf("switching view %s to table %s: it is %s, not building", view, table, v.State)
		}
	}
	return "", fmt.Errorf("switching view %s to %s.%s (removed meanwhile): %w", view, keyspace, table, ErrUnknownTable)
}

// MarkAborting takes table, a version of view a backfill was building, out
// of building before the backfill's functions are removed, as a
// lightweight transaction that Switch's serializes with: a table the view
// reads by then is refused with ErrActiveTable. A table already aborting
// (an abort that stopped half-way) or no longer registered (a start that
// failed before registering it) is no refusal.
func MarkAborting(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	q := fmt.Sprintf(`UPDATE %s SET state = ? WHERE view_name = ? AND table_name = ? IF state = ?`, cqlname.Table(keyspace, Table))
	current := map[string]any{}
	applied, err := s.Query(q, StateAborting, view, table, StateBuilding).WithContext(ctx).MapScanCAS(current)
	if err != nil {
		return fmt.Errorf("marking table %s of view %s as aborting: %w", table, view, err)
	}
	if applied {
		return nil
	}
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return err
	}
	if entry.ActiveTable == table {
		return fmt.Errorf("aborting table %s of view %s: %w", table, view, ErrActiveTable)
	}
	for _, v := range entry.Versions {
		if v.Table == table && v.State != StateAborting {
			return fmt.Errorf("aborting table %s of view %s: it is %s, not building", table, view, v.State)
		}
	}
	return nil
}

// Activate makes table the view's active table and retires the one active
// before, in one batch on the view's partition: atomic and isolated, so a
// reader sees the old active table or the new one, never neither. The batch
// is a lightweight transaction on the table's row (its state one of a
// registered table's, not aborting), so that it never races Unregister or
// an abort into pointing readers at a forgotten, dropped table. It
// returns the table active before ("" if none).
func Activate(ctx context.Context, s *gocql.Session, keyspace, view, table string) (string, error) {
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return "", err
	}
	return switchTo(ctx, s, keyspace, entry, table)
}

// switchTo is Activate from entry, the view's registry as the caller read it.
func switchTo(ctx context.Context, s *gocql.Session, keyspace string, entry Entry, table string) (string, error) {
	view := entry.View
	known := false
	for _, v := range entry.Versions {
		known = known || v.Table == table
	}
	if !known {
		return "", fmt.Errorf("activating %s.%s for view %s: %w", keyspace, table, view, ErrUnknownTable)
	}
	if entry.ActiveTable == table {
		return table, nil
	}
	b := s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	// The row must exist, and not be aborting (MarkAborting): a table an
	// abort is removing is never made active, whatever the caller read.
	b.Query(fmt.Sprintf(`UPDATE %s SET active_table = ?, state = ? WHERE view_name = ? AND table_name = ? IF state IN (?, ?, ?, ?)`, cqlname.Table(keyspace, Table)),
		table, StateActive, view, table, StateActive, StateBuilding, StateRetired, StateSnapshot)
	if entry.ActiveTable != "" {
		b.Query(fmt.Sprintf(`UPDATE %s SET state = ? WHERE view_name = ? AND table_name = ?`, cqlname.Table(keyspace, Table)),
			StateRetired, view, entry.ActiveTable)
	}
	applied, iter, err := s.ExecuteBatchCAS(b)
	if iter != nil {
		_ = iter.Close() // the rows that failed the condition: applied says enough
	}
	if err != nil {
		return "", fmt.Errorf("switching view %s to table %s: %w", view, table, err)
	}
	if !applied {
		return "", fmt.Errorf("activating %s.%s for view %s (removed or being aborted meanwhile): %w", keyspace, table, view, ErrUnknownTable)
	}
	return entry.ActiveTable, nil
}

// FindTable returns the entry of the view that has table among its
// versions, and that version.
func FindTable(ctx context.Context, s *gocql.Session, keyspace, table string) (Entry, Version, error) {
	entries, err := List(ctx, s, keyspace)
	if err != nil {
		return Entry{}, Version{}, err
	}
	for _, e := range entries {
		for _, v := range e.Versions {
			if v.Table == table {
				return e, v, nil
			}
		}
	}
	return Entry{}, Version{}, fmt.Errorf("finding table %s in %s.%s: %w", table, keyspace, Table, ErrUnknownTable)
}

// ErrActiveTable is the error for removing the table readers use.
var ErrActiveTable = errors.New("table is active")

// Unregister forgets one table version of view (the table is the caller's
// to drop); the active one cannot be forgotten.
func Unregister(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	entry, err := Get(ctx, s, keyspace, view)
	if err != nil {
		return err
	}
	if entry.ActiveTable == table {
		return fmt.Errorf("removing table %s of view %s from the registry: %w", table, view, ErrActiveTable)
	}
	return forget(ctx, s, keyspace, view, table)
}

// forget deletes a version's row unless it is the active one at that
// moment: a lightweight transaction, serialized with Activate's, so that a
// switch between the caller's read and the delete is never lost.
func forget(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	q := fmt.Sprintf(`DELETE FROM %s WHERE view_name = ? AND table_name = ? IF state != ?`, cqlname.Table(keyspace, Table))
	applied, err := s.Query(q, view, table, StateActive).WithContext(ctx).MapScanCAS(map[string]any{})
	if err != nil {
		return fmt.Errorf("removing table %s of view %s from the registry: %w", table, view, err)
	}
	if !applied {
		// Either the row is gone (nothing to forget) or it is active now.
		entry, err := Get(ctx, s, keyspace, view)
		if err != nil {
			return err
		}
		if entry.ActiveTable == table {
			return fmt.Errorf("removing table %s of view %s from the registry (activated meanwhile): %w", table, view, ErrActiveTable)
		}
	}
	return forgetHistory(ctx, s, keyspace, view, table)
}

// Drop forgets table, a version of view, and drops it. The registry is read
// at the moment of the drop, not taken from the caller: the table the view
// reads is refused with ErrActiveTable, whatever the caller last saw (a
// backfill record written before a switch, a listing). It is forgotten
// before it is dropped, so that a failure between the two leaves a table
// no reader is sent to.
func Drop(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	if err := Unregister(ctx, s, keyspace, view, table); err != nil {
		return err
	}
	if err := s.Query(fmt.Sprintf(`DROP TABLE IF EXISTS %s`, cqlname.Table(keyspace, table))).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("dropping table %s.%s: %w", keyspace, table, err)
	}
	return nil
}
