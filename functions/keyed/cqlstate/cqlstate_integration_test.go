package cqlstate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/keyed"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// testTable makes a state table in a keyspace of the test's own.
func testTable(t *testing.T) *Table {
	t.Helper()
	svc := testenv.Cassandra(t)
	settings := cassandra.Settings{Hosts: []string{svc.CassandraHost}}.Defaults()
	user, password, err := svc.CassandraCredentials()
	if err != nil {
		t.Fatal(err)
	}
	settings.Username, settings.Password = user, password
	session, err := cassandra.NewSession(settings)
	if err != nil {
		t.Fatal(err)
	}
	keyspace := fmt.Sprintf("statetest_%d", rand.Uint64()%1_000_000_000)
	t.Cleanup(func() {
		_ = session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
		session.Close()
	})
	if err := session.Query("CREATE KEYSPACE " + keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		t.Fatal(err)
	}
	table := TableName("dedup-bf-user_activity_v2")
	if err := Ensure(t.Context(), session, keyspace, table); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(t.Context(), session, keyspace, table); err != nil {
		t.Fatalf("creating the table again: %v", err)
	}
	return New(session, keyspace, table)
}

func snapshot(state string, entry int64, applied int64) keyed.Snapshot {
	return keyed.Snapshot{
		State:     []byte(state),
		Positions: map[string]envelope.Position{"persistent://t/ledger/events": {Ledger: 9, Entry: entry, Epoch: "e1"}},
		Applied:   applied,
	}
}

// TestTableKeepsTheHighestVersion saves, loads, and saves an older version
// after a newer one: the row keeps the newer. The empty key and one
// starting with a NUL are rows of their own.
func TestTableKeepsTheHighestVersion(t *testing.T) {
	table := testTable(t)
	ctx := t.Context()
	if snap, err := table.Load(ctx, "u1"); err != nil || snap.Applied != 0 || snap.State != nil {
		t.Fatalf("a key never saved: %+v, %v", snap, err)
	}
	for _, key := range []string{"u1", "", "\x00"} {
		if err := table.Save(ctx, key, snapshot(`{"ids":["`+fmt.Sprintf("%q", key)+`"]}`, 5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := table.Save(ctx, "u1", snapshot(`{"old":true}`, 3, 3)); err != nil {
		t.Fatal(err)
	}
	got, err := table.Load(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Applied != 5 || !strings.Contains(string(got.State), "u1") || got.Positions["persistent://t/ledger/events"].Entry != 5 {
		t.Errorf("after a late older save: %+v, want version 5", got)
	}
	for _, key := range []string{"", "\x00"} {
		got, err := table.Load(ctx, key)
		if err != nil || !strings.Contains(string(got.State), fmt.Sprintf("%q", key)) {
			t.Errorf("key %q: %s, %v", key, got.State, err)
		}
	}
	// All reads every row back under its message key, as Load does.
	all, err := table.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("All: %d keys, want 3", len(all))
	}
	for _, key := range []string{"u1", "", "\x00"} {
		one, _ := table.Load(ctx, key)
		if !reflect.DeepEqual(all[key], one) {
			t.Errorf("All's key %q: %+v, Load's %+v", key, all[key], one)
		}
	}
}

// TestStoreOverTheTable folds inputs through a store on the table, drops
// the store as a crash would, and folds on in a new one: the state carries
// on and a redelivered input is recognised.
func TestStoreOverTheTable(t *testing.T) {
	table := testTable(t)
	topic := "persistent://t/ledger/events"
	fold := func(store *keyed.Store, entry int64) (dup bool, before int) {
		txn, err := store.Begin(t.Context(), "k", envelope.Origin{Topic: topic, Position: envelope.Position{Ledger: 1, Entry: entry}})
		if err != nil {
			t.Fatal(err)
		}
		if txn.Duplicate() {
			dup = true
		} else {
			before = txn.State().(int)
			if err := txn.Commit(before + int(entry)); err != nil {
				t.Fatal(err)
			}
		}
		settled := make(chan struct{})
		txn.Settle(func(error) { close(settled) })
		select {
		case <-settled:
		case <-time.After(30 * time.Second):
			t.Fatal("not settled")
		}
		return dup, before
	}
	store := keyed.New(table, keyed.JSON[int](), keyed.Options{})
	for e := int64(1); e <= 3; e++ {
		fold(store, e)
	}
	store.Close()
	store = keyed.New(table, keyed.JSON[int](), keyed.Options{})
	defer store.Close()
	if dup, _ := fold(store, 2); !dup {
		t.Error("input 2, delivered again after the crash, was not recognised")
	}
	if _, before := fold(store, 4); before != 6 {
		t.Errorf("input 4 saw the state %d, want 1+2+3", before)
	}
	snap, err := table.Load(context.Background(), "k")
	if err != nil || string(snap.State) != "10" || snap.Applied != 4 {
		t.Errorf("stored %s at version %d (%v), want 10 at 4", snap.State, snap.Applied, err)
	}
}

func TestTableName(t *testing.T) {
	for _, tt := range []struct{ function, want string }{
		{"dedup", "dedup_state"},
		{"sku-refunds", "sku_refunds_state"},
		{"9lives", "f9lives_state"},
	} {
		if got := TableName(tt.function); got != tt.want {
			t.Errorf("TableName(%q) = %q, want %q", tt.function, got, tt.want)
		}
	}
	long := TableName(strings.Repeat("validate-bf-", 8))
	if len(long) > 48 || !strings.HasSuffix(long, "_state") {
		t.Errorf("TableName of a long name: %q", long)
	}
}
