package pf

import "strconv"

// UserConfigFingerprint is the user config key under which Foldline's
// deploy gives a function the fingerprint of its binary and config, a hex
// SHA-256 digest. An instance reports it as a user metric of the same name
// (`functions stats`), with the value FingerprintMetric gives, so that a
// deploy can tell an instance of the config it deployed from one of the
// config before: the worker restarts an updated function's instances a
// moment after the update returns, and until then the old ones answer
// that they are running.
const UserConfigFingerprint = "foldline.fingerprint"

// fingerprintDigits is how many leading hex digits of a fingerprint the
// metric holds: 52 bits, which a float64 holds exactly.
const fingerprintDigits = 13

// FingerprintMetric returns the metric value that stands for the
// fingerprint fp: its first 52 bits. ok is false when fp does not start
// with that many hex digits (a config no deploy of Foldline's wrote).
func FingerprintMetric(fp string) (value float64, ok bool) {
	if len(fp) < fingerprintDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(fp[:fingerprintDigits], 16, 64)
	if err != nil {
		return 0, false
	}
	return float64(n), true
}

// reportFingerprint records the fingerprint of the instance's user config,
// when it has one, as its user metric.
func (s *stats) reportFingerprint(userConfig map[string]any) {
	fp, _ := userConfig[UserConfigFingerprint].(string)
	if v, ok := FingerprintMetric(fp); ok {
		s.recordUserMetric(UserConfigFingerprint, v)
	}
}
