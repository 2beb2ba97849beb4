//go:build !unix

package trainingset

import "time"

// cpuTime is not measured here: 0.
func cpuTime() time.Duration { return 0 }
