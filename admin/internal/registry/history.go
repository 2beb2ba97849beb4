package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/internal/cqlname"
)

// HistoryTable is where the registry keeps what happened to each table
// version, in every tenant keyspace next to Table: which code built it
// (the digests of the binary and config of every stage of its path), which
// code changed in place under it and at which ledger positions, and when
// readers were switched to it or away. A table equals the fold of the
// ledger under one code only while its history holds no in-place change.
//
// It is a table of its own, not columns of Table, so that a registry made
// before it existed still reads (a keyspace without it has no history) and
// its appends never contend with the lightweight transactions of a switch.
const HistoryTable = "foldline_view_history"

// The kinds of Event.
const (
	// EventBuilt: the table was filled from the ledger's first event by
	// the code in Stages (foldline deploy creating a view, or a backfill).
	EventBuilt = "built"
	// EventRecorded: the code found running under a table that had no
	// history yet (built before Foldline recorded code). What built its
	// earlier rows is not known.
	EventRecorded = "recorded"
	// EventInPlace: the code of Stages replaced the running code of those
	// stages without rebuilding the table (foldline deploy --in-place):
	// the table holds the old code's results up to about Positions and the
	// new code's after.
	EventInPlace = "in-place"
	// EventActivated: readers were switched to the table.
	EventActivated = "activated"
	// EventDeactivated: readers were switched away from the table; its
	// path keeps following the ledger until Until (the rollback grace), so
	// that activating it again gives an up-to-date table.
	EventDeactivated = "deactivated"
	// EventStopped: the functions that filled the table were removed; it
	// holds the fold up to about Positions and follows the ledger no more.
	EventStopped = "stopped"
)

// StageCode is what of one stage decides what it writes: the digest of
// its binary and the digest of the part of its config its code reads
// (deploy.configDigest: not its name, parallelism, resources or the
// runtime's tuning).
type StageCode struct {
	// Stage is the stage's name in the manifests (a backfill's copy has
	// the name of the stage it copies), "sink" for the view's sink.
	Stage string `json:"stage"`
	// Function is the function that ran it (tenant/namespace/name).
	Function string `json:"function,omitempty"`
	Binary   string `json:"binary"`
	// Config is "" when unknown (a function deployed before Foldline
	// recorded config digests).
	Config string `json:"config,omitempty"`
}

// Event is one entry of a table version's history.
type Event struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// By is the command that made it: deploy, deploy --in-place,
	// backfill, views --activate.
	By string `json:"by,omitempty"`
	// Stages is the code of the path (built, recorded) or of the stages
	// whose code changed (in-place).
	Stages []StageCode `json:"stages,omitempty"`
	// Positions maps each ledger topic (a partition of a partitioned one)
	// to its last entry (ledger:entry) when the event took effect: for an
	// in-place change, events after it went through the new code (those
	// up to it still in flight may have gone either way); for stopped,
	// the table holds about the fold up to it.
	Positions map[string]string `json:"positions,omitempty"`
	// Until is, for deactivated, until when the table's path keeps
	// following the ledger (the rollback grace).
	Until time.Time `json:"until,omitzero"`
	// Note says more, for a person.
	Note string `json:"note,omitempty"`
}

// HistoryCQL is the statement that creates the history in keyspace.
func HistoryCQL(keyspace string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  view_name text,
  table_name text,
  at timeuuid,
  event text,
  PRIMARY KEY ((view_name), table_name, at))`, cqlname.Table(keyspace, HistoryTable))
}

// HistoryExists reports whether keyspace has a registry history.
func HistoryExists(ctx context.Context, s *gocql.Session, keyspace string) (bool, error) {
	var name string
	err := s.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, keyspace, HistoryTable).
		WithContext(ctx).Scan(&name)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up view history %s.%s: %w", keyspace, HistoryTable, err)
	}
	return true, nil
}

// Record appends ev to the history of table, a version of view. ev.At
// defaults to now.
func Record(ctx context.Context, s *gocql.Session, keyspace, view, table string, ev Event) error {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding a history event of %s: %w", table, err)
	}
	q := fmt.Sprintf(`INSERT INTO %s (view_name, table_name, at, event) VALUES (?, ?, ?, ?)`, cqlname.Table(keyspace, HistoryTable))
	if err := s.Query(q, view, table, gocql.UUIDFromTime(ev.At), string(data)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("recording %s of table %s of view %s: %w", ev.Kind, table, view, err)
	}
	return nil
}

// History returns the history of every table version of view, oldest
// event first, by table. A keyspace without the history table has none.
func History(ctx context.Context, s *gocql.Session, keyspace, view string) (map[string][]Event, error) {
	q := fmt.Sprintf(`SELECT table_name, event FROM %s WHERE view_name = ?`, cqlname.Table(keyspace, HistoryTable))
	iter := s.Query(q, view).WithContext(ctx).Iter()
	out := map[string][]Event{}
	var table, data string
	for iter.Scan(&table, &data) {
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			_ = iter.Close()
			return nil, fmt.Errorf("decoding a history event of %s.%s: %w", keyspace, table, err)
		}
		out[table] = append(out[table], ev)
	}
	if err := iter.Close(); err != nil {
		var reqErr gocql.RequestError
		if errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeInvalid {
			return map[string][]Event{}, nil // no history table: nothing recorded yet
		}
		return nil, fmt.Errorf("reading view history %s.%s: %w", keyspace, HistoryTable, err)
	}
	return out, nil
}

// forgetHistory deletes the history of one table version, or of every
// version of view when table is "". A keyspace without the history table
// has nothing to delete.
func forgetHistory(ctx context.Context, s *gocql.Session, keyspace, view, table string) error {
	q := fmt.Sprintf(`DELETE FROM %s WHERE view_name = ?`, cqlname.Table(keyspace, HistoryTable))
	args := []any{view}
	if table != "" {
		q += ` AND table_name = ?`
		args = append(args, table)
	}
	if err := s.Query(q, args...).WithContext(ctx).Exec(); err != nil {
		var reqErr gocql.RequestError
		if errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeInvalid {
			return nil
		}
		return fmt.Errorf("removing the history of %s from the registry: %w", orAll(table, view), err)
	}
	return nil
}

func orAll(table, view string) string {
	if table == "" {
		return "view " + view
	}
	return "table " + table
}

// CurrentCode folds a table's history into the code that fills it now, by
// stage: what built it (or was recorded running), with every in-place
// change applied after. ok is false when the history holds no code.
func CurrentCode(events []Event) (code map[string]StageCode, ok bool) {
	code = map[string]StageCode{}
	for _, ev := range events {
		switch ev.Kind {
		case EventBuilt, EventRecorded:
			clear(code)
			fallthrough
		case EventInPlace:
			for _, sc := range ev.Stages {
				code[sc.Stage] = sc
			}
			ok = true
		}
	}
	return code, ok
}

// InPlaceChanges returns the in-place changes of a table's history: a table
// with none equals the fold of the ledger under the code that built it.
func InPlaceChanges(events []Event) []Event {
	return slices.DeleteFunc(slices.Clone(events), func(ev Event) bool { return ev.Kind != EventInPlace })
}

// Following reports whether a table's path still follows the ledger as
// far as its history says: not once stopped (its functions were removed),
// until it is built or activated again. known is false when the history
// says nothing either way.
func Following(events []Event) (following, known bool) {
	for _, ev := range slices.Backward(events) {
		switch ev.Kind {
		case EventStopped:
			return false, true
		case EventBuilt, EventRecorded, EventActivated, EventDeactivated, EventInPlace:
			return true, true
		}
	}
	return false, false
}

// LastDeactivation returns the latest deactivated event of a table's
// history, if the table has not been activated or stopped since.
func LastDeactivation(events []Event) (Event, bool) {
	for _, ev := range slices.Backward(events) {
		switch ev.Kind {
		case EventDeactivated:
			return ev, true
		case EventActivated, EventStopped, EventBuilt:
			return Event{}, false
		}
	}
	return Event{}, false
}

// SortedStages returns code's stages by name, the sink last.
func SortedStages(code map[string]StageCode) []StageCode {
	keys := slices.Sorted(maps.Keys(code))
	out := make([]StageCode, 0, len(keys))
	for _, k := range keys {
		if k != SinkStage {
			out = append(out, code[k])
		}
	}
	if sc, ok := code[SinkStage]; ok {
		out = append(out, sc)
	}
	return out
}

// SinkStage is StageCode.Stage of a view's sink, whatever its version's
// function is called.
const SinkStage = "sink"
