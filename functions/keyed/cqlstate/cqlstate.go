// Package cqlstate keeps a stateful transformation's keyed states
// (package keyed) in a Cassandra table of the tenant's keyspace, one row per
// key, as the views keep theirs: the state as JSON, and per origin partition
// the position of the last input folded into it.
//
//	CREATE TABLE <keyspace>.<function>_state (
//	    key       text PRIMARY KEY, -- the message key ("" stored as "\x00")
//	    state     text,             -- the state, as JSON
//	    positions text,             -- {"<ledger partition>": "<position>", …}
//	    applied   bigint            -- inputs folded: the row's version
//	)
//
// Every write is USING TIMESTAMP applied, so that a write that arrives late
// (from an instance that had the key a moment before another) never takes
// the row back to an older state; Cassandra keeps the cells of the highest
// timestamp. Nothing else may write the table (a DELETE by hand at the
// current time would hide every later state).
package cqlstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gocql/gocql"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/internal/cqlname"
)

// User config keys of a stateful function, which foldline deploy sets: the
// table of its states. The Cassandra settings (hosts, consistency, tls_*)
// are the sink's keys (sinks/cassandra.ParseSettings), and so are the
// secrets it logs in with.
const (
	UserConfigKeyspace = "state_keyspace"
	UserConfigTable    = "state_table"
	// UserConfigCache is how many settled keys stay in memory (see
	// keyed.Options.CacheKeys): 0 keeps none, for a function whose
	// instances take keys over from one another. Default 100000.
	UserConfigCache = "state_cache"
)

// TableName is the state table of the function named function: its name,
// lower case with every other character than a letter, digit or _ as _,
// and "_state"; a name too long for Cassandra is cut and ends in a digest
// of the whole.
func TableName(function string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(function) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "f" + name
	}
	name += "_state"
	if len(name) > cqlname.MaxLength {
		sum := sha256.Sum256([]byte(function))
		name = name[:cqlname.MaxLength-15] + "_" + hex.EncodeToString(sum[:4]) + "_state"
	}
	return name
}

// TableCQL is the CREATE TABLE statement of a state table.
func TableCQL(keyspace, table string) string {
	return "CREATE TABLE IF NOT EXISTS " + cqlname.Table(keyspace, table) +
		" (key text PRIMARY KEY, state text, positions text, applied bigint)"
}

// Ensure creates the state table in keyspace (which must exist) unless it
// exists.
func Ensure(ctx context.Context, session *gocql.Session, keyspace, table string) error {
	if err := errors.Join(cqlname.Check("keyspace", keyspace), cqlname.Check("table", table)); err != nil {
		return err
	}
	if err := session.Query(TableCQL(keyspace, table)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("creating state table %s.%s: %w", keyspace, table, err)
	}
	if err := session.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("waiting for schema agreement on %s.%s: %w", keyspace, table, err)
	}
	return nil
}

// Table is a keyed.Backend of one state table.
type Table struct {
	session         *gocql.Session
	load, save, all string
}

// New returns the backend of keyspace.table (names checked by the caller,
// see Ensure).
func New(session *gocql.Session, keyspace, table string) *Table {
	t := cqlname.Table(keyspace, table)
	return &Table{
		session: session,
		load:    "SELECT state, positions, applied FROM " + t + " WHERE key = ?",
		save:    "UPDATE " + t + " USING TIMESTAMP ? SET state = ?, positions = ?, applied = ? WHERE key = ?",
		all:     "SELECT key, state, positions, applied FROM " + t,
	}
}

// rowKey is the row of a message key: Cassandra refuses an empty partition
// key, so "" is stored as "\x00", and a key that starts with "\x00" gets
// another in front.
func rowKey(key string) string {
	if key == "" || key[0] == 0 {
		return "\x00" + key
	}
	return key
}

// messageKey is the message key of a row (rowKey undone).
func messageKey(row string) string {
	if row != "" && row[0] == 0 {
		return row[1:]
	}
	return row
}

// Load reads key's row.
func (t *Table) Load(ctx context.Context, key string) (keyed.Snapshot, error) {
	var (
		state, positions *string
		applied          *int64
	)
	err := t.session.Query(t.load, rowKey(key)).WithContext(ctx).Scan(&state, &positions, &applied)
	if errors.Is(err, gocql.ErrNotFound) {
		return keyed.Snapshot{}, nil
	}
	if err != nil {
		return keyed.Snapshot{}, fmt.Errorf("reading the state of key %q: %w", key, err)
	}
	return snapshotOf(key, state, positions, applied)
}

// snapshotOf is the snapshot of key's row read as state, positions and
// applied.
func snapshotOf(key string, state, positions *string, applied *int64) (keyed.Snapshot, error) {
	var snap keyed.Snapshot
	if state != nil {
		snap.State = []byte(*state)
	}
	if applied != nil {
		snap.Applied = *applied
	}
	if positions != nil && *positions != "" {
		var texts map[string]string
		if err := json.Unmarshal([]byte(*positions), &texts); err != nil {
			return keyed.Snapshot{}, fmt.Errorf("reading the positions of key %q: %w", key, err)
		}
		snap.Positions = make(map[string]envelope.Position, len(texts))
		for topic, text := range texts {
			p, err := envelope.ParsePosition(text)
			if err != nil {
				return keyed.Snapshot{}, fmt.Errorf("reading the positions of key %q: %w", key, err)
			}
			snap.Positions[topic] = p
		}
	}
	return snap, nil
}

// All reads every row of the table, by message key: the states a resumed
// fused backfill starts from.
func (t *Table) All(ctx context.Context) (map[string]keyed.Snapshot, error) {
	iter := t.session.Query(t.all).WithContext(ctx).PageSize(1000).Iter()
	snaps := map[string]keyed.Snapshot{}
	var (
		row              string
		state, positions *string
		applied          *int64
	)
	for iter.Scan(&row, &state, &positions, &applied) {
		key := messageKey(row)
		snap, err := snapshotOf(key, state, positions, applied)
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		snaps[key] = snap
		state, positions, applied = nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading the states: %w", err)
	}
	return snaps, nil
}

// Save writes key's row at the timestamp of its version.
func (t *Table) Save(ctx context.Context, key string, snap keyed.Snapshot) error {
	texts := make(map[string]string, len(snap.Positions))
	for topic, p := range snap.Positions {
		texts[topic] = p.String()
	}
	positions, err := json.Marshal(texts)
	if err != nil {
		return fmt.Errorf("encoding the positions of key %q: %w", key, err)
	}
	var state *string
	if snap.State != nil {
		s := string(snap.State)
		state = &s
	}
	if err := t.session.Query(t.save, snap.Applied, state, string(positions), snap.Applied, rowKey(key)).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("saving the state of key %q: %w", key, err)
	}
	return nil
}
