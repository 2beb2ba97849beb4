package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/internal/cqlname"
	"github.com/foldline/foldline/sinks/cassandra"
	"github.com/foldline/foldline/sinks/cassandra/reader"
)

// TestReaderFollowsTheRegistry reads a deployed view the way applications
// do (package reader): every row equals the fold, a deleted row is gone,
// and after a switch to another table version the reader follows within
// its refresh interval.
func TestReaderFollowsTheRegistry(t *testing.T) {
	s := deployShop(t, "reader")
	s.ingest(t, generate(t, 400, 51))
	s.waitForFold(t, 3*time.Minute)
	ctx := t.Context()
	r, err := reader.Open(ctx, s.session, s.keyspace, "user_activity", reader.Options{Refresh: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Table() != "user_activity_v1" {
		t.Fatalf("active table %s", r.Table())
	}
	want := s.expected().UserActivity
	for user, row := range want {
		got, found, err := r.Get(ctx, user)
		if err != nil || !found || got["page_views"] != row.PageViews || got["purchases"] != row.Purchases || got["spent_cents"] != row.SpentCents {
			t.Fatalf("Get(%s) = %v, %v, %v; want %+v", user, got, found, err, row)
		}
		if _, bookkeeping := got[cassandra.ColumnDeleted]; bookkeeping {
			t.Fatalf("Get(%s) shows %s", user, cassandra.ColumnDeleted)
		}
	}
	count := func() int {
		n := 0
		for _, err := range r.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if n := count(); n != len(want) {
		t.Fatalf("All yields %d rows, want %d", n, len(want))
	}

	// A tombstone, as the sink leaves for a deleted row.
	var gone string
	for user := range want {
		gone = user
		break
	}
	if err := s.session.Query(fmt.Sprintf(`UPDATE %s SET fl_deleted = true WHERE "user" = ?`, cqlname.Table(s.keyspace, "user_activity_v1")), gone).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, found, err := r.Get(ctx, gone); err != nil || found {
		t.Errorf("Get of a deleted row: found %v, %v", found, err)
	}
	if n := count(); n != len(want)-1 {
		t.Errorf("All yields %d rows after a delete, want %d", n, len(want)-1)
	}

	// A new version with one row, switched to as a backfill would.
	entry, err := registry.Get(ctx, s.session, s.keyspace, "user_activity")
	if err != nil {
		t.Fatal(err)
	}
	var schema cassandra.ViewSchema
	if err := json.Unmarshal([]byte(entry.Versions[0].Definition), &schema); err != nil {
		t.Fatal(err)
	}
	schema.Keyspace, schema.Table = s.keyspace, "user_activity_v9"
	if err := cassandra.EnsureSchema(ctx, s.session, schema, cassandra.DefaultReplication()); err != nil {
		t.Fatal(err)
	}
	def, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.RegisterBuilding(ctx, s.session, s.keyspace, "user_activity", "user_activity_v9", string(def)); err != nil {
		t.Fatal(err)
	}
	if err := s.session.Query(fmt.Sprintf(`INSERT INTO %s ("user", page_views) VALUES ('u-new', 7)`, cqlname.Table(s.keyspace, "user_activity_v9"))).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Activate(ctx, s.session, s.keyspace, "user_activity", "user_activity_v9"); err != nil {
		t.Fatal(err)
	}
	var row reader.Row
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, found, err := r.Get(ctx, "u-new")
		if err != nil {
			t.Fatal(err)
		}
		if found {
			row = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader still reads %s 10 s after the switch to user_activity_v9", r.Table())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.Table() != "user_activity_v9" || row["page_views"] != int64(7) {
		t.Errorf("after the switch: table %s, row %v", r.Table(), row)
	}
}
