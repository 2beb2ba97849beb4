package jsonwire

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// timeSamples are time tokens around the edges of Time.
var timeSamples = []string{
	`"2026-11-01T10:00:00Z"`, `"2026-11-01T10:00:00.5Z"`, `"2026-11-01T10:00:00.123Z"`, `"2026-11-01T10:00:00.123456789Z"`,
	`"2026-11-01T10:00:00.1234567891Z"`, `"2026-11-01T10:00:00.Z"`, `"2026-11-01T10:00:00,5Z"`, `"2026-11-01T10:00:00+01:00"`,
	`"2026-11-01T10:00:00z"`, `"2026-11-01t10:00:00Z"`, `"2026-11-01 10:00:00Z"`, `"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`,
	`"2024-02-29T00:00:00Z"`, `"2023-02-29T00:00:00Z"`, `"1900-02-29T00:00:00Z"`, `"2000-02-29T00:00:00Z"`, `"2026-04-31T00:00:00Z"`,
	`"2026-13-01T00:00:00Z"`, `"2026-00-01T00:00:00Z"`, `"2026-01-00T00:00:00Z"`, `"2026-01-01T24:00:00Z"`, `"2026-01-01T23:60:00Z"`,
	`"2026-01-01T23:59:60Z"`, `"2026-1-01T00:00:00Z"`, `"+026-01-01T00:00:00Z"`, `"2026-01-01T00:00:00"`, `"2026-01-01T00:00:00Z`,
	`2026-01-01T00:00:00Z`, `"2026-01-01T00:00:00ZZ"`, `"2026-01-01T0a:00:00Z"`, `"\u0032026-01-01T00:00:00Z"`, `""`, `"Z"`, `null`,
	` "2026-11-01T10:00:00Z"`,
}

// TestTimeAgreesWithTimeParse checks that wherever Time answers, time.Parse
// and UnmarshalJSON return the same time.
func TestTimeAgreesWithTimeParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	samples := append([]string{}, timeSamples...)
	for range 5000 {
		at := time.Unix(rng.Int64N(300e9)-62e9, rng.Int64N(1e9)).UTC()
		if rng.IntN(4) == 0 {
			at = at.Truncate(time.Millisecond)
		}
		samples = append(samples, `"`+at.Format(time.RFC3339Nano)+`"`)
	}
	answered := 0
	for _, tok := range samples {
		if timeAgrees(t, tok) {
			answered++
		}
	}
	if answered < 5000 {
		t.Errorf("Time answered for %d samples only", answered)
	}
	for tok, want := range map[string]bool{`"2026-11-01T10:00:00Z"`: true, `"2024-02-29T00:00:00.5Z"`: true, `"2023-02-29T00:00:00Z"`: false, `"2026-11-01T10:00:00+00:00"`: false} {
		if _, ok := Time([]byte(tok)); ok != want {
			t.Errorf("Time(%s) answers %v, want %v", tok, ok, want)
		}
	}
}

func FuzzTime(f *testing.F) {
	for _, s := range timeSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) { timeAgrees(t, tok) })
}

// timeAgrees fails t when Time answers for tok and time.Parse or
// UnmarshalJSON disagree, and reports whether Time answered.
func timeAgrees(t *testing.T, tok string) bool {
	t.Helper()
	got, ok := Time([]byte(tok))
	if !ok {
		return false
	}
	parsed, err := time.Parse(time.RFC3339Nano, tok[1:len(tok)-1])
	if err != nil || !reflect.DeepEqual(got, parsed) || !reflect.DeepEqual(got, parsed.UTC()) {
		t.Fatalf("Time(%s) = %v; time.Parse gives %v, %v", tok, got, parsed, err)
	}
	var unmarshalled time.Time
	if err := unmarshalled.UnmarshalJSON([]byte(tok)); err != nil || !reflect.DeepEqual(got, unmarshalled) {
		t.Fatalf("Time(%s) = %v; UnmarshalJSON gives %v, %v", tok, got, unmarshalled, err)
	}
	return true
}
