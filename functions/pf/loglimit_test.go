package pf

import (
	"testing"
	"time"
)

func TestLogLimit(t *testing.T) {
	l := &logLimit{window: time.Second, burst: 3}
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	var logged, omittedSeen int
	for i := range 10 { // ten lines within one window
		ok, omitted := l.allow(t0.Add(time.Duration(i) * time.Millisecond))
		if ok {
			logged++
			omittedSeen += omitted
		}
	}
	if logged != 3 || omittedSeen != 0 {
		t.Fatalf("first window: %d logged, %d reported omitted; want 3 and 0", logged, omittedSeen)
	}
	ok, omitted := l.allow(t0.Add(1500 * time.Millisecond))
	if !ok || omitted != 7 {
		t.Fatalf("first line of the next window: logged %v, omitted %d; want logged, 7 omitted", ok, omitted)
	}
	if ok, omitted := l.allow(t0.Add(1600 * time.Millisecond)); !ok || omitted != 0 {
		t.Fatalf("second line of the window: logged %v, omitted %d; want logged, 0", ok, omitted)
	}
	// A clock that goes back starts a new window rather than muting the log.
	l.allow(t0.Add(1700 * time.Millisecond))
	if ok, _ := l.allow(t0); !ok {
		t.Fatal("a line after the clock went back was left out")
	}
}
