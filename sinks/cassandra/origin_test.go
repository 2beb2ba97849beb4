package cassandra

import (
	"cmp"
	"errors"
	"testing"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
)

// twoAddsOnOneRow is a transformation that, for each event, adds to one
// row twice: once for the event and once more for its bonus. Its outputs
// share the input's origin but for their index.
var twoAddsOnOneRow = transform.New(transform.JSON[struct {
	User  string `json:"user"`
	Bonus int64  `json:"bonus"`
}], func(in transform.Input[struct {
	User  string `json:"user"`
	Bonus int64  `json:"bonus"`
}]) ([]transform.Output, error) {
	return []transform.Output{
		transform.Row("activity", "user", in.Event.User).Apply(transform.Add("views", 1)),
		transform.Row("activity", "user", in.Event.User).Apply(transform.Add("views", in.Event.Bonus)),
	}, nil
})

// opsOf runs the transformation over one event per origin position and
// returns its view operations as the sink receives them.
func opsOf(t *testing.T, events []string, origin func(i int) envelope.Origin) []Op {
	t.Helper()
	var ops []Op
	for i, payload := range events {
		recs, err := twoAddsOnOneRow.Process(transform.Message{Key: "k", EventTime: t0, Payload: []byte(payload), Origin: origin(i)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			vo, err := envelope.DecodeRowOp(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, Op{View: vo, Origin: r.Origin})
		}
	}
	return ops
}

func ledgerOrigin(epoch string) func(i int) envelope.Origin {
	return func(i int) envelope.Origin {
		return envelope.Origin{Topic: "persistent://t/ledger/events", Position: envelope.Position{Ledger: 3, Entry: int64(i), Epoch: epoch}}
	}
}

// Two operations on one row caused by one ledger event both apply, and
// each is recognised when delivered again (issue: the second was skipped as
// a redelivery of the first, since both carried the event's position).
func TestFoldAppliesEveryOutputOfOneEvent(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	ops := opsOf(t, []string{`{"user":"u1","bonus":10}`, `{"user":"u1","bonus":100}`}, ledgerOrigin(""))
	if len(ops) != 4 {
		t.Fatalf("got %d operations, want 4", len(ops))
	}
	redelivered := append(append([]Op(nil), ops...), ops...)
	rows := foldAll(t, v, redelivered)
	row := rows[rowKeyOf(t, v, "u1")]
	if got := row.values[0]; got != int64(1+10+1+100) {
		t.Errorf("views = %v, want %d: every output applied exactly once", got, 1+10+1+100)
	}
}

func TestFoldRefusesAnotherEpoch(t *testing.T) {
	v := mustCompile(t, testSchema("ks"))
	tests := []struct {
		name        string
		first, then string
		thenLedger  int64
		wantErr     error
		wantViews   int64
		wantEpoch   string
	}{
		{name: "same epoch, later", first: "e1", then: "e1", thenLedger: 4, wantViews: 1 + 5 + 1 + 7},
		{name: "same epoch, earlier: a redelivery", first: "e1", then: "e1", thenLedger: 1, wantViews: 1 + 5},
		// The later incarnation restarts ledger ids: its positions are
		// behind the row's, and must not be taken for redeliveries.
		{name: "another epoch", first: "e1", then: "e2", thenLedger: 1, wantErr: ErrEpochChanged, wantViews: 1 + 5},
		{name: "rows written before epochs adopt one", first: "", then: "e2", thenLedger: 4, wantViews: 1 + 5 + 1 + 7, wantEpoch: "e2"},
		{name: "an unknown epoch keeps the row's", first: "e1", then: "", thenLedger: 4, wantViews: 1 + 5 + 1 + 7, wantEpoch: "e1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := opsOf(t, []string{`{"user":"u1","bonus":5}`}, ledgerOrigin(tt.first))
			then := opsOf(t, []string{`{"user":"u1","bonus":7}`}, func(int) envelope.Origin {
				return envelope.Origin{Topic: "persistent://t/ledger/events", Position: envelope.Position{Ledger: tt.thenLedger, Epoch: tt.then}}
			})
			r := newRowState(len(v.colTypes))
			for i, op := range append(first, then...) {
				b, err := v.bind(i, op, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = v.fold(r, b)
				if i < len(first) && err != nil {
					t.Fatal(err)
				}
				if i >= len(first) && !errors.Is(err, tt.wantErr) {
					t.Fatalf("folding %s: %v, want %v", op.Origin.Position, err, tt.wantErr)
				}
			}
			if got := r.values[0]; got != tt.wantViews {
				t.Errorf("views = %v, want %d", got, tt.wantViews)
			}
			if want := cmp.Or(tt.wantEpoch, tt.first); r.applied["persistent://t/ledger/events"].Epoch != want {
				t.Errorf("row's epoch %q, want %q", r.applied["persistent://t/ledger/events"].Epoch, want)
			}
		})
	}
}

// The applier against the real Cassandra: two adds on one row from one
// event give both; a redelivery of everything changes nothing and is
// counted as skipped; an operation of another ledger epoch is rejected
// (dead-lettered with the reason), never skipped.
func TestApplierEveryOutputOfOneEventAndEpochs(t *testing.T) {
	session, settings, keyspace := testKeyspace(t)
	settings.RowCache = -1 // read every row from Cassandra
	a := newTestApplier(t, session, testSchema(keyspace), settings)
	ops := opsOf(t, []string{`{"user":"u1","bonus":10}`, `{"user":"u2","bonus":3}`, `{"user":"u1","bonus":100}`}, ledgerOrigin("e1"))
	b := NewBatcher(a, Cut{Size: 100, Linger: 0, Eager: true}, 1)
	go b.Run(t.Context())
	submit := func(ops []Op) []error {
		errs := make([]error, len(ops))
		for i, op := range ops {
			errs[i] = b.Submit(t.Context(), op)
		}
		return errs
	}
	for i, err := range submit(ops) {
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
	}
	checkTable(t, session, a.view, ops)
	for i, err := range submit(ops) {
		if err != nil {
			t.Fatalf("redelivered operation %d: %v", i, err)
		}
	}
	checkTable(t, session, a.view, ops)
	if got := b.Totals(); got != (Totals{Applied: 6, Skipped: 6}) {
		t.Errorf("totals %+v, want 6 applied and 6 skipped", got)
	}
	reset := opsOf(t, []string{`{"user":"u1","bonus":1}`}, func(int) envelope.Origin {
		return envelope.Origin{Topic: "persistent://t/ledger/events", Position: envelope.Position{Ledger: 1, Epoch: "e2"}}
	})
	for i, err := range submit(reset) {
		if !errors.Is(err, ErrRejected) || !errors.Is(err, ErrEpochChanged) {
			t.Errorf("operation %d of another epoch: %v, want rejected for its epoch", i, err)
		}
	}
	checkTable(t, session, a.view, ops)
	if got := b.Totals(); got != (Totals{Applied: 6, Skipped: 6, Rejected: 2}) {
		t.Errorf("totals %+v, want 2 rejected", got)
	}
}
