package main

import (
	"encoding/json"
	"testing"
)

func TestBenchEventIsJSONOfAtLeastSizeAndVaries(t *testing.T) {
	for _, size := range []int{10, 100, 300} {
		seen := map[string]bool{}
		for i := range 50 {
			b := benchEvent(i, size)
			var ev map[string]any
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatalf("event %d of size %d: %v: %s", i, size, err, b)
			}
			if len(b) < size {
				t.Fatalf("event %d: %d bytes, want at least %d: %s", i, len(b), size, b)
			}
			if seen[string(b)] {
				t.Fatalf("event %d repeats an earlier one: %s", i, b)
			}
			seen[string(b)] = true
		}
	}
}
