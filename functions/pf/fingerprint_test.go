package pf

import "testing"

// The metric holds a fingerprint's first 52 bits exactly; anything that
// is not a hex digest has none.
func TestFingerprintMetric(t *testing.T) {
	for _, tc := range []struct {
		fp   string
		want float64
		ok   bool
	}{
		{"fffffffffffff0123", 1<<52 - 1, true},
		{"0000000000001", 1, true},
		{"08575aa30b43d281e3a834c70a41b5e0047d9e449da043b0c4f9dc612f79e9f6", 0x08575aa30b43d, true},
		{"000000000000", 0, false}, // too short
		{"older", 0, false},
		{"zz575aa30b43d281", 0, false},
		{"", 0, false},
	} {
		got, ok := FingerprintMetric(tc.fp)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FingerprintMetric(%q) = %v, %v; want %v, %v", tc.fp, got, ok, tc.want, tc.ok)
		}
	}
}

// An instance reports its config's fingerprint among its user metrics from
// the start, and none when the config has no fingerprint.
func TestInstanceReportsItsFingerprint(t *testing.T) {
	s := newStats()
	s.reportFingerprint(map[string]any{UserConfigFingerprint: "0000000000001abc"})
	if got := s.userMetricsCopy(); got[UserConfigFingerprint] != 1 || len(got) != 1 {
		t.Errorf("user metrics %v, want only %s = 1", got, UserConfigFingerprint)
	}
	for _, conf := range []map[string]any{{}, {UserConfigFingerprint: 12}, {UserConfigFingerprint: "older"}} {
		s := newStats()
		s.reportFingerprint(conf)
		if got := s.userMetricsCopy(); len(got) != 0 {
			t.Errorf("config %v: user metrics %v, want none", conf, got)
		}
	}
}
