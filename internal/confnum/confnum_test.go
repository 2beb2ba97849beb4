package confnum

import (
	"strings"
	"testing"
)

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want float64
		err  string
	}{
		{3.0, 3, ""}, {7, 7, ""}, {int64(-2), -2, ""}, {uint64(9), 9, ""}, {"64", 64, ""}, {"1.5", 1.5, ""},
		{"lots", 0, `want a number, got "lots"`}, {true, 0, "want a number, got true"}, {nil, 0, "want a number"},
	} {
		got, err := Number(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Number(%#v) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Number(%#v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
