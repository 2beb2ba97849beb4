package cassandra

import "testing"

func TestPrefetchStatement(t *testing.T) {
	tests := []struct {
		name string
		key  []KeyColumn
		want string
	}{
		{name: "text key is read ahead", key: []KeyColumn{{Name: "user", Type: "text"}},
			want: `SELECT "user", "n", fl_deleted, fl_latest_at, fl_applied FROM "ks"."t" WHERE "user" IN ?`},
		{name: "bigint key is read ahead", key: []KeyColumn{{Name: "id", Type: "bigint"}},
			want: `SELECT "id", "n", fl_deleted, fl_latest_at, fl_applied FROM "ks"."t" WHERE "id" IN ?`},
		{name: "timestamp key does not round-trip exactly", key: []KeyColumn{{Name: "at", Type: "timestamp"}}},
		{name: "two key columns", key: []KeyColumn{{Name: "a", Type: "text"}, {Name: "b", Type: "text"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ViewSchema{Keyspace: "ks", Table: "t", View: "v", Key: tc.key,
				Columns: []ValueColumn{{Name: "n", Type: "bigint", Merge: "add"}}}
			if got := prefetchStatement(s); got != tc.want {
				t.Errorf("prefetchStatement() = %q, want %q", got, tc.want)
			}
		})
	}
}
