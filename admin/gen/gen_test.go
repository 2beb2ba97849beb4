package gen_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/admin/gen"
	"github.com/foldline/foldline/internal/shopfold"
)

func generate(t *testing.T, o gen.Options) ([]byte, gen.Stats) {
	t.Helper()
	var buf bytes.Buffer
	stats, err := gen.Generate(&buf, o)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return buf.Bytes(), stats
}

func split(b []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func TestSameSeedSameBytes(t *testing.T) {
	o := gen.Options{Events: 20000, Users: 300, SKUs: 40, Seed: 42, Malformed: 0.05}
	a, _ := generate(t, o)
	b, _ := generate(t, o)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same options differ")
	}
	o.Seed = 43
	c, _ := generate(t, o)
	if bytes.Equal(a, c) {
		t.Error("different seeds give the same stream")
	}
}

// TestStream checks what the demo and the tests rely on, against the
// independent fold: the malformed lines are exactly the ones it rejects,
// refunds name earlier orders of the same user for at most their total, a
// few users and skus are heavy, and some event times are out of order.
func TestStream(t *testing.T) {
	out, stats := generate(t, gen.Options{Events: 50000, Users: 2000, SKUs: 200, Seed: 1, Malformed: 0.02})
	lines := split(out)
	if len(lines) != 50000 || stats.Lines != 50000 {
		t.Fatalf("%d lines, stats say %d, want 50000", len(lines), stats.Lines)
	}
	if stats.PageViews+stats.AddToCarts+stats.Purchases+stats.Refunds+stats.Malformed != stats.Lines {
		t.Errorf("stats do not add up: %+v", stats)
	}
	if stats.Malformed < 500 || stats.Malformed > 1500 || stats.Refunds == 0 || stats.Purchases == 0 {
		t.Errorf("unlikely mix for a 2%% share: %+v", stats)
	}
	fold := shopfold.Fold(lines)
	if len(fold.Rejected) != stats.Malformed {
		t.Errorf("the fold rejects %d lines, the generator wrote %d malformed", len(fold.Rejected), stats.Malformed)
	}

	type purchase struct {
		user  string
		total int64
	}
	orders := map[string]purchase{}
	refunded := map[string]bool{}
	perUser := map[string]int{}
	perSKU := map[string]int{}
	outOfOrder := 0
	var last time.Time
	rejected := map[int]bool{}
	for _, n := range fold.Rejected {
		rejected[n] = true
	}
	for n, line := range lines {
		if rejected[n] {
			continue
		}
		var e struct {
			Type, User, Time, Order, SKU string
			Qty                          int64
			PriceCents                   int64 `json:"price_cents"`
			AmountCents                  int64 `json:"amount_cents"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		at, _ := time.Parse(time.RFC3339Nano, e.Time)
		if at.Before(last) {
			outOfOrder++
		}
		last = at
		perUser[e.User]++
		switch e.Type {
		case "purchase":
			orders[e.Order] = purchase{e.User, e.Qty * e.PriceCents}
			perSKU[e.SKU]++
		case "refund":
			o, ok := orders[e.Order]
			switch {
			case !ok:
				t.Errorf("line %d refunds order %s, which no earlier line purchased", n+1, e.Order)
			case refunded[e.Order]:
				t.Errorf("line %d refunds order %s a second time", n+1, e.Order)
			case o.user != e.User || e.AmountCents > o.total:
				t.Errorf("line %d refunds %d of order %s by %s, which %s bought for %d", n+1, e.AmountCents, e.Order, e.User, o.user, o.total)
			}
			refunded[e.Order] = true
		}
	}
	if outOfOrder == 0 {
		t.Error("no event time is out of order")
	}
	assertSkewed(t, "users", perUser)
	assertSkewed(t, "skus", perSKU)
}

// assertSkewed checks that the busiest key has many times the median's count.
func assertSkewed(t *testing.T, what string, counts map[string]int) {
	t.Helper()
	var all []int
	for _, c := range counts {
		all = append(all, c)
	}
	slices.Sort(all)
	top, median := all[len(all)-1], all[len(all)/2]
	if top < 10*median {
		t.Errorf("%s are not skewed: the busiest has %d events, the median %d", what, top, median)
	}
}

func TestEveryLineIsOneLine(t *testing.T) {
	out, _ := generate(t, gen.Options{Events: 5000, Seed: 3, Malformed: 1})
	lines := split(out)
	if len(lines) != 5000 {
		t.Fatalf("%d lines, want 5000", len(lines))
	}
	if fold := shopfold.Fold(lines); fold.Accepted != 0 {
		t.Errorf("with --malformed 1, %d lines are still valid", fold.Accepted)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    gen.Options
		want []string
	}{
		{name: "defaults", o: gen.Options{}},
		{name: "negative counts", o: gen.Options{Events: -1, Users: -2, SKUs: -3}, want: []string{"events:", "users:", "skus:"}},
		{name: "share above one", o: gen.Options{Malformed: 1.5}, want: []string{"malformed:"}},
		{name: "negative durations", o: gen.Options{Interval: -1, Jitter: -1}, want: []string{"interval:", "jitter:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted bad options")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if _, gerr := gen.Generate(io.Discard, tc.o); gerr == nil || !strings.Contains(gerr.Error(), tc.want[0]) {
				t.Errorf("Generate with bad options: %v", gerr)
			}
		})
	}
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteErrorsAreReturned(t *testing.T) {
	if _, err := gen.Generate(failingWriter{}, gen.Options{Events: 100000}); !errors.Is(err, errDiskFull) {
		t.Errorf("got %v, want %v", err, errDiskFull)
	}
}

func BenchmarkGenerate(b *testing.B) {
	o := gen.Options{Events: 100000, Users: 10000, SKUs: 1000, Seed: 1, Malformed: 0.01}
	for b.Loop() {
		if _, err := gen.Generate(io.Discard, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(o.Events*b.N)/b.Elapsed().Seconds(), "events/s")
}

func TestEndPlacesTheLastEvent(t *testing.T) {
	end := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, gen.Options{Events: 500, Seed: 3, End: end, Interval: time.Minute, Jitter: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var last struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
		t.Fatal(err)
	}
	if d := last.Time.Sub(end); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("the last event is at %s, want %s", last.Time, end)
	}
}
