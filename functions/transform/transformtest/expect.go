package transformtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/functions/transform"
)

// Expect checks that p turns in into exactly the outputs want, in order,
// encoded as Process encodes them (so keys and event times that want leaves
// empty are the input's). It is the one-line body of a transformation's
// table test.
func Expect(t testing.TB, p transform.Processor, in transform.Message, want ...transform.Output) {
	t.Helper()
	got, err := p.Process(in)
	if err != nil {
		t.Errorf("Process(%s): %v", describe(in), err)
		return
	}
	echo := transform.New(func([]byte) (struct{}, error) { return struct{}{}, nil },
		func(transform.Input[struct{}]) ([]transform.Output, error) { return want, nil })
	wantRecs, err := echo.Process(in)
	if err != nil {
		t.Fatalf("encoding the expected outputs: %v", err)
	}
	if g, w := format(got), format(wantRecs); g != w {
		t.Errorf("Process(%s) returned\n\t%s\nwant\n\t%s", describe(in), g, w)
	}
}

// format prints records one per line, payloads as text, for readable diffs.
func format(recs []transform.Record) string {
	if len(recs) == 0 {
		return "(no outputs)"
	}
	var b strings.Builder
	for i, r := range recs {
		if i > 0 {
			b.WriteString("\n\t")
		}
		fmt.Fprintf(&b, "key %q at %s origin %s %s: %s", r.Key, r.EventTime.UTC().Format(time.RFC3339Nano), r.Origin.Topic, r.Origin.Position, r.Payload)
	}
	return b.String()
}
