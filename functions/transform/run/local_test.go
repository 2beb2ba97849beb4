package run_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/run"
)

// The last function of a chain gives the records Process gives, each view
// operation in its local form, which reads back as the operation its JSON
// holds; the rest unchanged; its errors are Process's.
func TestProcessLocalGivesTheOperationsProcessGives(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 123e6, time.UTC)
	origin := envelope.Origin{Topic: "persistent://shop/pipeline/valid", Position: envelope.Position{Ledger: 3, Entry: 9}}
	ops := 0
	for _, payload := range []string{`{"sku":"s1"}`, `{"sku":"s\"2<"}`, `{}`, `{"sku":`} {
		in := transform.Message{Key: "u1", EventTime: at, Payload: []byte(payload), Origin: origin}
		want, wantErr := run.Process(bySKU, in)
		got, err := run.ProcessLocal(bySKU, in)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%s: error %v, Process's %v", payload, err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, Process gave %d", payload, len(got), len(want))
		}
		for i := range got {
			if got[i].Payload[0] == '{' { // not a view operation: as Process gives it
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("%s: record %d: %+v, Process's %+v", payload, i, got[i], want[i])
				}
				continue
			}
			ops++
			gotOp, err := envelope.DecodeLocalRowOp(got[i].Payload)
			if err != nil {
				t.Fatal(err)
			}
			wantOp, err := envelope.DecodeRowOp(want[i].Payload)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotOp, wantOp) {
				t.Errorf("%s: record %d: %+v, Process's %+v", payload, i, gotOp, wantOp)
			}
			got[i].Payload, want[i].Payload = nil, nil
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("%s: record %d: %+v, Process's %+v", payload, i, got[i], want[i])
			}
		}
	}
	if ops != 2 {
		t.Errorf("%d view operations in their local form, want 2", ops)
	}
}
