package main

import (
	"os"
	"strings"
	"testing"
)

// testdata/events.json is go test -json of three packages: a failing one
// with skipped tests and subtests (one without a message), a passing one
// with a skipped test and a test that logs, and one without tests.
func TestReportPrintsWhatGoTestWouldThenTheSkips(t *testing.T) {
	events, err := os.Open("testdata/events.json")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	var out strings.Builder
	if err := report(events, &out); err != nil {
		t.Fatal(err)
	}
	want := `    a_test.go:8: wrong
--- FAIL: TestFails/broken (0.00s)
--- FAIL: TestFails (0.00s)
FAIL
FAIL	example.com/shop/a	0.006s
?   	example.com/shop/c	[no test files]
ok  	example.com/shop/b	0.004s

4 skipped, for 3 reasons:

2 skipped: service unreachable: Pulsar is not reachable; start the local stack with scripts/stack up
  example.com/shop/a: TestNeedsPulsar TestSub/needs

1 skipped: (no message)
  example.com/shop/a: TestSub/bare

1 skipped: service unreachable: Cassandra is not reachable; start the local stack with scripts/stack up
  example.com/shop/b: TestNeedsCassandra
`
	if got := out.String(); got != want {
		t.Errorf("report printed\n%s\nwant\n%s", got, want)
	}
}

func TestReportPassesOtherLinesThrough(t *testing.T) {
	var out strings.Builder
	in := "go: downloading example.com/x v1.0.0\n" + `{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}` + "\n" + `{"Action":"pass","Package":"p"}` + "\n"
	if err := report(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if want := "go: downloading example.com/x v1.0.0\nok  \tp\t0.1s\n"; out.String() != want {
		t.Errorf("report printed %q, want %q", out.String(), want)
	}
}
