package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
)

func TestViewSchemaValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*ViewSchema)
		want   []string // fragments of the expected problems; none means valid
	}{
		{name: "valid", modify: func(*ViewSchema) {}},
		{name: "upper-case table", modify: func(s *ViewSchema) { s.Table = "Activity" }, want: []string{`table "Activity"`}},
		{name: "reserved prefix", modify: func(s *ViewSchema) { s.Columns[0].Name = "fl_views" }, want: []string{"reserved"}},
		{name: "unknown type", modify: func(s *ViewSchema) { s.Columns[0].Type = "counter" }, want: []string{`type "counter"`}},
		{name: "add on text", modify: func(s *ViewSchema) { s.Columns[3].Merge = envelope.MergeAdd }, want: []string{"not numeric"}},
		{name: "duplicate column", modify: func(s *ViewSchema) { s.Columns[1].Name = "views" }, want: []string{"defined twice"}},
		{name: "every problem at once", modify: func(s *ViewSchema) {
			s.Keyspace, s.View, s.Key = "", "", nil
			s.Columns[0].Merge = "sum"
		}, want: []string{"keyspace", "view: is empty", "key: needs", `merge "sum"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSchema("ks")
			s.Columns = slices.Clone(s.Columns)
			tt.modify(&s)
			err := s.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want problems %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestTableDifferences(t *testing.T) {
	s := testSchema("ks")
	matching := func() map[string]existingColumn {
		cols := map[string]existingColumn{"user": {Kind: "partition_key", Position: 0, Type: "text"}}
		for _, c := range s.Columns {
			cols[c.Name] = existingColumn{Kind: "regular", Position: -1, Type: canonicalType(c.Type)}
		}
		for name, typ := range bookkeepingTypes {
			cols[name] = existingColumn{Kind: "regular", Position: -1, Type: typ}
		}
		return cols
	}
	tests := []struct {
		name   string
		modify func(map[string]existingColumn)
		want   []string
	}{
		{name: "same", modify: func(map[string]existingColumn) {}},
		{name: "type differs", modify: func(c map[string]existingColumn) {
			c["views"] = existingColumn{Kind: "regular", Position: -1, Type: "int"}
		},
			want: []string{"column views has type int, the definition wants bigint"}},
		{name: "missing and extra", modify: func(c map[string]existingColumn) {
			delete(c, "mood")
			c["extra"] = existingColumn{Kind: "regular", Position: -1, Type: "text"}
		}, want: []string{"column extra text (value) is not in the definition", "column mood text is missing"}},
		{name: "key became a value", modify: func(c map[string]existingColumn) {
			c["user"] = existingColumn{Kind: "clustering", Position: 0, Type: "text"}
		}, want: []string{"column user is a clustering key column, the definition wants partition key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := matching()
			tt.modify(cols)
			if got := tableDifferences(s, cols); fmt.Sprint(got) != fmt.Sprint(tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("differences = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	view := map[string]any{
		"keyspace": "shop", "table": "user_activity_v1", "view": "user_activity",
		"key":     []any{map[string]any{"name": "user", "type": "text"}},
		"columns": []any{map[string]any{"name": "page_views", "type": "bigint", "merge": "add"}},
	}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{"deadLetterTopic": "runtime's own key"}
		for k, v := range view {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		conf    map[string]any
		check   func(t *testing.T, c Config)
		wantErr []string
	}{
		{name: "defaults", conf: with(nil), check: func(t *testing.T, c Config) {
			if c.Settings.BuildingBatchSize != 20000 || c.Settings.BuildingLinger != time.Second || c.Settings.Registry != "" {
				t.Errorf("building settings = %d, %s, registry %q; want 20000, 1s, none", c.Settings.BuildingBatchSize, c.Settings.BuildingLinger, c.Settings.Registry)
			}
			if c.Settings.BatchSize != 1000 || c.Settings.Linger != 50*time.Millisecond || c.Settings.RowCache != 100000 ||
				c.Settings.Consistency != "LOCAL_QUORUM" || c.Settings.Replication["class"] != "SimpleStrategy" {
				t.Errorf("settings = %+v, want the defaults", c.Settings)
			}
			if c.View.Table != "user_activity_v1" || len(c.View.Columns) != 1 {
				t.Errorf("view = %+v", c.View)
			}
		}},
		{name: "explicit values", conf: with(map[string]any{"hosts": "a:9042, b", "batch_size": 10, "linger": "2ms", "row_cache": 0, "rows_per_write": 1,
			"trace": true, "replication": map[string]any{"class": "NetworkTopologyStrategy", "dc1": "3"}}), check: func(t *testing.T, c Config) {
			if !slices.Equal(c.Settings.Hosts, []string{"a:9042", "b"}) || c.Settings.BatchSize != 10 || c.Settings.Linger != 2*time.Millisecond ||
				c.Settings.cacheRows() != 0 || c.Settings.RowsPerWrite != 1 || c.Settings.Replication["dc1"] != "3" || !c.Settings.Trace {
				t.Errorf("settings = %+v", c.Settings)
			}
		}},
		{name: "every problem at once", conf: with(map[string]any{"batch_size": 0, "linger": "soon", "consistency": "MOST",
			"retry_backoff_min": "2s", "retry_backoff_max": "1s", "table": "", "rows_per_write": 0}),
			wantErr: []string{"batch_size", `linger "soon"`, `consistency "MOST"`, "retry_backoff_max", `table ""`, "rows_per_write"}},
		{name: "negative batch and a bad duration", conf: with(map[string]any{"batch_size": -5, "linger": "5x"}),
			wantErr: []string{"batch_size -5: must be at least 1", `linger "5x": want a duration`}},
		{name: "eager live batches by default", conf: with(nil), check: func(t *testing.T, c Config) {
			if got := c.Settings.LiveCut(); got.Quiet != 0 || !got.Eager || got.Size != 1000 || got.Linger != 50*time.Millisecond {
				t.Errorf("live cut = %+v, want eager, no quiet wait, 1000 and 50ms", got)
			}
		}},
		{name: "live linger explicit", conf: with(map[string]any{"live_linger": "7ms"}), check: func(t *testing.T, c Config) {
			if got := c.Settings.LiveCut().Quiet; got != 7*time.Millisecond {
				t.Errorf("quiet wait = %s, want 7ms", got)
			}
		}},
		{name: "live linger beyond the linger", conf: with(map[string]any{"live_linger": "80ms"}),
			wantErr: []string{"live_linger 80ms: must not exceed linger 50ms"}},
		{name: "negative live linger", conf: with(map[string]any{"live_linger": "-5ms"}),
			wantErr: []string{"live_linger -5ms: must not be negative"}},
		{name: "words for a number", conf: with(map[string]any{"concurrency": "lots"}),
			wantErr: []string{"concurrency string: want a whole number"}},
		{name: "TLS from a CA file", conf: with(map[string]any{"tls_ca_file": "/etc/ca.pem"}), check: func(t *testing.T, c Config) {
			if tls := c.Settings.TLS; tls == nil || tls.CAFile != "/etc/ca.pem" || !tls.ValidateHostname {
				t.Errorf("TLS = %+v, want the CA file and host names checked", tls)
			}
		}},
		{name: "TLS on with the system's CAs, no host name check", conf: with(map[string]any{"tls": true, "tls_validate_hostname": false}), check: func(t *testing.T, c Config) {
			if tls := c.Settings.TLS; tls == nil || tls.CAFile != "" || tls.ValidateHostname {
				t.Errorf("TLS = %+v", tls)
			}
		}},
		{name: "no TLS by default", conf: with(nil), check: func(t *testing.T, c Config) {
			if c.Settings.TLS != nil {
				t.Errorf("TLS = %+v, want none", c.Settings.TLS)
			}
		}},
		{name: "a client certificate without its key", conf: with(map[string]any{"tls_cert_file": "/etc/c.pem"}),
			wantErr: []string{"tls_cert_file and tls_key_file: give both or neither"}},
		{name: "hostile registry", conf: with(map[string]any{"registry": `foldline_views" WHERE true; DROP KEYSPACE shop; --`}),
			wantErr: []string{`registry "foldline_views\" WHERE`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(tt.conf)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseConfig() = nil error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("ParseConfig() = %v, want it to mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestCQLQuotesHostileNames: whatever name reaches a statement stays one
// quoted identifier (Validate refuses such names before; this is the
// second line).
func TestCQLQuotesHostileNames(t *testing.T) {
	hostile := `x"; DROP KEYSPACE shop; --`
	tests := []struct {
		name, cql, want string
	}{
		{name: "registry watch", cql: RegistryWatch{Keyspace: "shop", Registry: hostile}.StateCQL(), want: `FROM "shop"."x""; DROP KEYSPACE shop; --" WHERE`},
		{name: "keyspace", cql: ViewSchema{Keyspace: hostile}.KeyspaceCQL(DefaultReplication()), want: `EXISTS "x""; DROP KEYSPACE shop; --" WITH`},
		{name: "table", cql: ViewSchema{Keyspace: "shop", Table: hostile, Key: []KeyColumn{{Name: hostile, Type: "text"}}}.TableCQL(),
			want: `EXISTS "shop"."x""; DROP KEYSPACE shop; --" ("x""; DROP KEYSPACE shop; --" text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.cql, tt.want) {
				t.Errorf("CQL = %s\nwant it to contain %s", tt.cql, tt.want)
			}
		})
	}
}

func TestRowCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newRowCache(2)
	for _, k := range []string{"a", "b"} {
		c.put(k, newRowState(1))
	}
	c.get("a")
	c.put("c", newRowState(1))
	for k, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, ok := c.get(k); ok != want {
			t.Errorf("cached(%s) = %v, want %v", k, ok, want)
		}
	}
	off := newRowCache(0)
	off.put("a", newRowState(1))
	if _, ok := off.get("a"); ok {
		t.Error("a cache of capacity 0 kept a row")
	}
}

// recordingApply answers every operation and records the batch sizes.
type recordingApply struct {
	mu      sync.Mutex
	batches []int
	reject  map[int64]bool // entries to reject
}

func (r *recordingApply) Start(_ context.Context, ops []Op) *Pending {
	r.mu.Lock()
	r.batches = append(r.batches, len(ops))
	r.mu.Unlock()
	res := Result{Errs: make([]error, len(ops))}
	for i, op := range ops {
		if r.reject[op.Origin.Position.Entry] {
			res.Errs[i] = fmt.Errorf("%w: entry %d", ErrRejected, op.Origin.Position.Entry)
		}
	}
	return &Pending{res: res}
}

// startFunc adapts a function to BatchStarter.
type startFunc func(ctx context.Context, ops []Op) *Pending

func (f startFunc) Start(ctx context.Context, ops []Op) *Pending { return f(ctx, ops) }

// submitAnswered submits op to b and marks answered done when its batch
// answers; an error answer fails the test.
func submitAnswered(t *testing.T, b *Batcher, answered *sync.WaitGroup, op Op) {
	t.Helper()
	answered.Add(1)
	if err := b.SubmitAsync(t.Context(), op, func(err error) {
		if err != nil {
			t.Error(err)
		}
		answered.Done()
	}); err != nil {
		t.Fatal(err)
	}
}

func runBatcher(t *testing.T, starter BatchStarter, size int, linger time.Duration) *Batcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := NewBatcher(starter, Cut{Size: size, Linger: linger, Eager: true}, 2)
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func TestBatcherAnswersEveryCallerWithItsOwnResult(t *testing.T) {
	rec := &recordingApply{reject: map[int64]bool{7: true, 42: true}}
	b := runBatcher(t, rec, 16, time.Millisecond)
	const callers = 100
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			errs[i] = b.Submit(t.Context(), upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if want := rec.reject[int64(i)]; errors.Is(err, ErrRejected) != want || (!want && err != nil) {
			t.Errorf("operation %d: err = %v, want rejected=%v", i, err, want)
		}
	}
	total := 0
	for _, n := range rec.batches {
		if n > 16 {
			t.Errorf("a batch of %d operations exceeds the batch size 16", n)
		}
		total += n
	}
	if total != callers {
		t.Errorf("applied %d operations, want %d", total, callers)
	}
}

func TestBatcherFlushesALoneCallerWithoutLingering(t *testing.T) {
	rec := &recordingApply{}
	// With an hour of linger, only the "every waiting caller is in the
	// batch" rule lets these calls return before the test's deadline.
	b := runBatcher(t, rec, 1000, time.Hour)
	for i := range 3 {
		if err := b.Submit(t.Context(), upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op()); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(rec.batches, []int{1, 1, 1}) {
		t.Errorf("batches = %v, want three of one operation", rec.batches)
	}
}

func TestBatcherWaitsForAnnouncedOperations(t *testing.T) {
	rec := &recordingApply{}
	b := runBatcher(t, rec, 1000, time.Hour)
	// As the sink does with the runtime's pending count: each submitter
	// announces how many more are at hand, so one batch takes all five even
	// though each caller is alone in the batch when it submits.
	var done sync.WaitGroup
	for i := range 5 {
		b.Upcoming(4 - i)
		done.Add(1)
		if err := b.SubmitAsync(t.Context(), upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op(), func(err error) {
			if err != nil {
				t.Error(err)
			}
			done.Done()
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // slower than the batcher, as a runtime is
	}
	done.Wait()
	if !slices.Equal(rec.batches, []int{5}) {
		t.Errorf("batches = %v, want one of five operations", rec.batches)
	}
}

func TestBatcherLiveLingerGathersASteadyStream(t *testing.T) {
	rec := &recordingApply{}
	ctx, cancel := context.WithCancel(context.Background())
	// Eager, with an hour of linger: without the quiet wait each of these
	// lone callers would be written at once, a batch of one each.
	b := NewBatcher(rec, Cut{Size: 1000, Linger: time.Hour, Eager: true, Quiet: 200 * time.Millisecond}, 2)
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var answered sync.WaitGroup
	start := time.Now()
	for i := range 4 {
		submitAnswered(t, b, &answered, upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op())
		time.Sleep(5 * time.Millisecond)
	}
	answered.Wait()
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("the batch was written after %s, before its quiet wait of 200ms", waited)
	}
	if !slices.Equal(rec.batches, []int{4}) {
		t.Errorf("batches = %v, want one of four operations", rec.batches)
	}
	// A full batch does not wait.
	b.SetCut(Cut{Size: 2, Linger: time.Hour, Eager: true, Quiet: time.Hour})
	for i := range 2 {
		submitAnswered(t, b, &answered, upsert("u", "p1", int64(i)).col("views", envelope.MergeAdd, 1).op())
	}
	answered.Wait()
	if !slices.Equal(rec.batches, []int{4, 2}) {
		t.Errorf("batches = %v, want 4, then a full batch of 2 at once", rec.batches)
	}
}

func TestBatcherBuildingBatchesWaitForTheirSize(t *testing.T) {
	rec := &recordingApply{}
	ctx, cancel := context.WithCancel(context.Background())
	live := Cut{Size: 1000, Linger: time.Hour, Eager: true}
	b := NewBatcher(rec, Cut{Size: 3, Linger: time.Hour}, 2) // building
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var answered sync.WaitGroup
	submit := func(i int) {
		submitAnswered(t, b, &answered, upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op())
	}
	// Nothing more is ever announced, and each caller is alone when it
	// submits: a live batcher would write six batches of one.
	for i := range 6 {
		submit(i)
		time.Sleep(5 * time.Millisecond)
	}
	answered.Wait()
	b.SetCut(live) // the table went live: a lone operation goes at once
	submit(6)
	answered.Wait()
	if !slices.Equal(rec.batches, []int{3, 3, 1}) {
		t.Errorf("batches = %v, want 3 and 3 while building, then 1 live", rec.batches)
	}
}

func TestBatcherFlushStartsABuildingBatch(t *testing.T) {
	rec := &recordingApply{}
	ctx, cancel := context.WithCancel(context.Background())
	b := NewBatcher(rec, Cut{Size: 1000, Linger: time.Hour}, 2) // building
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var answered sync.WaitGroup
	for i := range 2 {
		submitAnswered(t, b, &answered, upsert("u", "p0", int64(i)).col("views", envelope.MergeAdd, 1).op())
	}
	b.Flush() // with an hour of linger, only this lets them be answered
	answered.Wait()
	if !slices.Equal(rec.batches, []int{2}) {
		t.Errorf("batches = %v, want one of two operations", rec.batches)
	}
}

func TestBatcherSubmitEndsWithItsContext(t *testing.T) {
	block := make(chan struct{})
	b := runBatcher(t, startFunc(func(ctx context.Context, ops []Op) *Pending {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return &Pending{res: Result{Errs: make([]error, len(ops))}}
	}), 10, time.Millisecond)
	defer close(block)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Submit(ctx, upsert("u", "p0", 1).op()); !errors.Is(err, context.Canceled) {
		t.Errorf("Submit with a cancelled context = %v, want context.Canceled", err)
	}
}
