package transformtest_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/envelope"
	"github.com/foldline/foldline/functions/transform"
	"github.com/foldline/foldline/functions/transform/transformtest"
)

type event struct {
	N int `json:"n"`
}

func echo(in transform.Input[event]) ([]transform.Output, error) {
	return []transform.Output{transform.Emit("", in.Event)}, nil
}

var calls atomic.Int64

// Processors that break the contract, one way each.
var broken = map[string]transform.Processor{
	"reads the clock": transform.New(transform.JSON[event], func(in transform.Input[event]) ([]transform.Output, error) {
		return []transform.Output{transform.Emit("", time.Now().UnixNano())}, nil
	}),
	"keeps state between calls": transform.New(transform.JSON[event], func(in transform.Input[event]) ([]transform.Output, error) {
		return []transform.Output{transform.Emit("", calls.Add(1))}, nil
	}),
	"panics on bad input": transform.New(func(b []byte) (event, error) {
		return event{N: int(b[0])}, nil
	}, echo),
	"accepts garbage":  transform.New(func([]byte) (event, error) { return event{}, nil }, echo),
	"loses the origin": originLoser{transform.New(transform.JSON[event], echo)},
	"emits nothing":    transform.New(transform.JSON[event], func(transform.Input[event]) ([]transform.Output, error) { return nil, nil }),
	"fails valid input": transform.New(transform.JSON[event], func(transform.Input[event]) ([]transform.Output, error) {
		return nil, errors.New("no")
	}),
}

type originLoser struct{ transform.Processor }

func (o originLoser) Process(m transform.Message) ([]transform.Record, error) {
	recs, err := o.Processor.Process(m)
	for i := range recs {
		recs[i].Origin = envelope.Origin{}
	}
	return recs, err
}

var inputs = []transform.Message{
	{Key: "a", Payload: []byte(`{"n":1}`)},
	{Key: "b", Payload: []byte(`{"n":2}`)},
}

const brokenEnv = "TRANSFORMTEST_BROKEN"

// TestBroken is the child side of TestRunCatchesBrokenTransformations: it
// runs the suite on one broken processor, and must fail.
func TestBroken(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("run by TestRunCatchesBrokenTransformations")
	}
	transformtest.Run(t, broken[name], inputs...)
}

func TestRunCatchesBrokenTransformations(t *testing.T) {
	tests := []struct {
		name string
		want string // the failing subtest
	}{
		{name: "reads the clock", want: "--- FAIL: TestBroken/deterministic"},
		{name: "keeps state between calls", want: "--- FAIL: TestBroken/deterministic"},
		{name: "panics on bad input", want: "--- FAIL: TestBroken/no_panic"},
		{name: "accepts garbage", want: "--- FAIL: TestBroken/malformed_input_is_an_error"},
		{name: "loses the origin", want: "--- FAIL: TestBroken/origin_kept"},
		{name: "emits nothing", want: "--- FAIL: TestBroken/outputs"},
		{name: "fails valid input", want: "--- FAIL: TestBroken/outputs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBroken$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a transformation that %s:\n%s", tc.name, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestRunPassesAGoodTransformation(t *testing.T) {
	transformtest.Run(t, transform.New(transform.JSON[event], echo), inputs...)
}
