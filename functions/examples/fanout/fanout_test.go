package fanout_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/examples/fanout"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/memview"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

var at = time.Date(2026, 11, 1, 10, 0, 7, 0, time.UTC)

const event = `{"id":"f-1","key":"k3","time":"2026-11-01T10:00:07Z","amount":5}`

func TestSplit(t *testing.T) {
	transformtest.Expect(t, fanout.Split, transform.Message{Key: "k3", Payload: []byte(event)},
		transform.Emit("k3", fanout.Event{ID: "f-1", Key: "k3", Time: at, Amount: 5}).At(at),
		transform.Emit("k3", fanout.Event{ID: "f-1", Key: "k3", Time: at, Amount: 500}).At(at),
	)
}

func TestTally(t *testing.T) {
	row := transform.Row(fanout.View, fanout.ColKey, "k3")
	transformtest.Expect(t, fanout.Tally, transform.Message{Key: "k3", Payload: []byte(event)},
		row.Apply(transform.Add(fanout.ColTotal, 5), transform.Add(fanout.ColOps, 1)).At(at),
		row.Apply(transform.Add(fanout.ColTotal, 50), transform.Add(fanout.ColOps, 1)).At(at),
	)
}

func TestRejectsBadEvents(t *testing.T) {
	for _, payload := range []string{
		`{"id":"f-1","time":"2026-11-01T10:00:07Z","amount":5}`,
		`{"id":"f-1","key":"k3","amount":5}`,
		`{"id":"f-1","key":"k3","time":"2026-11-01T10:00:07Z","amount":0}`,
	} {
		if _, err := fanout.Split.Process(transform.Message{Payload: []byte(payload)}); err == nil {
			t.Errorf("split accepted %s", payload)
		}
	}
}

func TestContract(t *testing.T) {
	transformtest.Run(t, fanout.Split, transform.Message{Key: "k3", Payload: []byte(event)})
	transformtest.Run(t, fanout.Tally, transform.Message{Key: "k3", Payload: []byte(event)})
}

// TestPipelineFold runs events through both stages as the runtime chains
// them (each record's origin handed to the next stage), checks that the four
// operations of one event have four distinct, increasing positions, and
// folds them with memview into 1111·amount and 4 ops per event.
func TestPipelineFold(t *testing.T) {
	const ledger = "persistent://fanout/ledger/events"
	views := memview.New()
	want := map[string][2]int64{}
	for i := range 30 {
		key := fmt.Sprintf("k%d", i%4)
		amount := int64(i%7 + 1)
		in := transform.Message{
			Key:     key,
			Payload: fmt.Appendf(nil, `{"id":"f-%d","key":%q,"time":"2026-11-01T10:00:07Z","amount":%d}`, i, key, amount),
			Origin:  envelope.Origin{Topic: ledger, Position: envelope.Position{Ledger: 7, Entry: int64(i)}},
		}
		parts, err := fanout.Split.Process(in)
		if err != nil {
			t.Fatal(err)
		}
		var ops []transform.Record
		for _, p := range parts {
			recs, err := fanout.Tally.Process(transform.Message{Key: p.Key, EventTime: p.EventTime, Payload: p.Payload, Origin: p.Origin})
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, recs...)
		}
		paths := []string{"/0/0", "/0/1", "/1/0", "/1/1"}
		if len(ops) != len(paths) {
			t.Fatalf("event %d gave %d operations, want %d", i, len(ops), len(paths))
		}
		for j, op := range ops {
			if op.Origin.Topic != ledger || op.Origin.Position.Event() != in.Origin.Position || op.Origin.Position.Path != paths[j] {
				t.Errorf("event %d: operation %d has origin %s %s, want %s %s%s", i, j, op.Origin.Topic, op.Origin.Position, ledger, in.Origin.Position, paths[j])
			}
			if j > 0 && ops[j-1].Origin.Position.Compare(op.Origin.Position) >= 0 {
				t.Errorf("event %d: operation %d (%s) does not come after %d (%s)", i, j, op.Origin.Position, j-1, ops[j-1].Origin.Position)
			}
			vo, err := envelope.DecodeViewOp(op.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if err := views.Apply(vo); err != nil {
				t.Fatal(err)
			}
		}
		w := want[key]
		want[key] = [2]int64{w[0] + fanout.Contribution*amount, w[1] + fanout.OpsPerEvent}
	}
	rows := views.Rows(fanout.View)
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		key := r.Key[fanout.ColKey].(string)
		if got := [2]any{r.Columns[fanout.ColTotal], r.Columns[fanout.ColOps]}; got != [2]any{want[key][0], want[key][1]} {
			t.Errorf("row %s: total, ops = %v, want %v", key, got, want[key])
		}
	}
}
