package benchreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseAim(t *testing.T) {
	tests := []struct {
		name    string
		aim     string
		want    Aim
		wantErr error
	}{
		{name: "ratio", aim: "<= 8x", want: Aim{Op: "<=", Number: 8, Unit: "x"}},
		{name: "ratio with the times sign", aim: ">=0.9×", want: Aim{Op: ">=", Number: 0.9, Unit: "x"}},
		{name: "value with a unit", aim: "< 250 ms", want: Aim{Op: "<", Number: 250, Unit: "ms"}},
		{name: "value without a unit", aim: "> 3", want: Aim{Op: ">", Number: 3}},
		{name: "unicode operator", aim: "≤ 4x", want: Aim{Op: "<=", Number: 4, Unit: "x"}},
		{name: "no operator", aim: "8x", wantErr: ErrAim},
		{name: "no number", aim: "<= fast", wantErr: ErrAim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAim(tt.aim)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseAim(%q) error %v, want %v", tt.aim, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("ParseAim(%q) = %+v, want %+v", tt.aim, got, tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	backfill := Figure{Bench: "backfill", Figure: "deploy to switch", Value: 76, Unit: "s"}.Against("plain reader", 3.2)
	p99 := Figure{Bench: "freshness", Figure: "p99", Value: 180, Unit: "ms"}
	tests := []struct {
		name string
		fig  Figure
		want Verdict
	}{
		{name: "no aim", fig: backfill, want: NoAim},
		{name: "ratio missed", fig: backfill.Aiming("<= 8x"), want: Missed},
		{name: "ratio met", fig: backfill.Aiming("<= 24x"), want: Met},
		{name: "value met", fig: p99.Aiming("< 250 ms"), want: Met},
		{name: "value missed at the bound", fig: p99.Aiming("< 180 ms"), want: Missed},
		{name: "value met at the bound", fig: p99.Aiming("<= 180 ms"), want: Met},
		{name: "time units converted", fig: p99.Aiming("< 0.25 s"), want: Met},
		{name: "ratio aim without a limit", fig: p99.Aiming("<= 2x"), want: Unjudged},
		{name: "other unit", fig: p99.Aiming("< 250 events/s"), want: Unjudged},
		{name: "unreadable", fig: p99.Aiming("fast"), want: Unjudged},
		{name: "greater than", fig: Figure{Value: 3.4, Unit: "events/s"}.Against("plain", 1).Aiming(">= 3x"), want: Met},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Judge(tt.fig); got != tt.want {
				t.Errorf("Judge(%+v) = %v, want %v", tt.fig, got, tt.want)
			}
		})
	}
}

func TestAgainstZeroLimit(t *testing.T) {
	f := Figure{Value: 5}.Against("nothing", 0)
	if f.Ratio != 0 || f.Limit != "nothing" {
		t.Errorf("Against a zero limit = %+v, want ratio 0 and the limit named", f)
	}
}

func TestAppendAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.jsonl")
	a := Figure{Bench: "sink", Figure: "shop", Value: 41000, Unit: "events/s"}.Against("plain writer", 12000).Aiming(">= 3x")
	b := Figure{Bench: "freshness", Figure: "p99", Value: 120, Unit: "ms", Aim: "< 250 ms"}
	if err := Append(path, a); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, b); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Figure{a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
}

// TestRecordFields pins the field names other emitters write.
func TestRecordFields(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Figure{Bench: "b", Figure: "f"}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for _, want := range []string{"bench", "figure", "value", "unit", "limit", "limit_value", "ratio", "aim"} {
		if _, ok := m[want]; !ok {
			t.Errorf("record %s lacks %q (has %v)", buf.String(), want, keys)
		}
	}
	if len(m) != 8 {
		t.Errorf("record has fields %v, want exactly the eight of the contract", keys)
	}
}

func TestReadSkipsBadLines(t *testing.T) {
	in := `{"bench":"a","figure":"x","value":1,"unit":"s"}

not json
{"bench":"","figure":"y"}
{"bench":"b","figure":"z","value":2,"unit":"ms","limit":null,"limit_value":null,"ratio":null,"aim":""}
`
	got, err := Read(strings.NewReader(in))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("error %v, want ErrMalformed", err)
	}
	if !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("error %q does not name lines 3 and 4", err)
	}
	if len(got) != 2 || got[0].Bench != "a" || got[1].Bench != "b" {
		t.Errorf("read %+v, want the figures of lines 1 and 5", got)
	}
}

func TestEmitWithoutFile(t *testing.T) {
	t.Setenv(EnvFile, "")
	if err := Emit(Figure{Bench: "b", Figure: "f"}); err != nil {
		t.Errorf("Emit with %s unset: %v", EnvFile, err)
	}
}

func TestDocumentCounts(t *testing.T) {
	figs := []Figure{
		{Bench: "a", Figure: "met", Value: 1, Unit: "ms", Aim: "< 2 ms"},
		{Bench: "a", Figure: "missed", Value: 3, Unit: "ms", Aim: "< 2 ms"},
		{Bench: "a", Figure: "context", Value: 3, Unit: "ms"},
	}
	d := NewDocument(figs, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "")
	if d.Met != 1 || d.Missed != 1 {
		t.Errorf("met %d, missed %d; want 1 and 1", d.Met, d.Missed)
	}
	var buf bytes.Buffer
	if err := d.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Document
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("the document does not read back: %+v, want %+v", back, d)
	}
}

func TestQuantity(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		unit string
		want string
	}{
		{name: "large", v: 13107.4, unit: "events/s", want: "13107 events/s"},
		{name: "hundreds", v: 143.4, unit: "ms", want: "143 ms"},
		{name: "tens", v: 76.29, unit: "s", want: "76.3 s"},
		{name: "small", v: 3.1912, unit: "s", want: "3.19 s"},
		{name: "no unit", v: 0.5, want: "0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quantity(tt.v, tt.unit); got != tt.want {
				t.Errorf("Quantity(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
			}
		})
	}
}

func ExampleDocument_WriteTable() {
	figs := []Figure{
		Figure{Bench: "backfill", Figure: "deploy to switch", Value: 76.29, Unit: "s"}.Against("plain reader", 3.19).Aiming("<= 8x"),
		{Bench: "freshness", Figure: "p99", Value: 143, Unit: "ms", Aim: "< 250 ms"},
	}
	_ = NewDocument(figs, time.Time{}, "").WriteTable(os.Stdout)
	// Output:
	// bench      figure            value   limit                ratio   aim       met?
	// backfill   deploy to switch  76.3 s  plain reader 3.19 s  23.92×  <= 8x     NO
	// freshness  p99               143 ms  -                    -       < 250 ms  yes
}
