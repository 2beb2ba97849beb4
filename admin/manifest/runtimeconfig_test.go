package manifest_test

import "testing"

// TestLoadChecksTheRuntimeSettings: the client settings, the collector's,
// and resources.ram against the runtime's soft memory limit.
func TestLoadChecksTheRuntimeSettings(t *testing.T) {
	cases := []struct {
		name  string
		edits []edit
		want  []wantProblem
	}{
		{
			name: "good settings of a function and of a sink",
			edits: []edit{
				{"functions/purchases.yaml", "  retryBackoffMs: 200", "  retryBackoffMs: 200\n  receiverQueueSize: 2000\n  maxPendingMessages: 4000\n" +
					"  compression: zstd\n  batchingMaxMessages: 500\n  batchingMaxSize: 65536\n  batchingMaxPublishDelayMs: 5"},
				{"views/user_activity.yaml", "    batch_size: 1000", "    batch_size: 1000\n    receiverQueueSize: 1000\n    compression: none"},
			},
		},
		{
			name: "bad settings, each at its line",
			edits: []edit{
				{"functions/purchases.yaml", "  retryBackoffMs: 200", "  retryBackoffMs: 200\n  receiverQueueSize: 0\n  compression: brotli\n  batchingMaxPublishDelayMs: 1.5"},
				{"views/user_activity.yaml", "    batch_size: 1000", "    batch_size: 1000\n    maxPendingMessages: lots"},
			},
			want: []wantProblem{
				{"functions/purchases.yaml", "receiverQueueSize: 0", "userConfig.receiverQueueSize", "want a whole number ≥ 1"},
				{"functions/purchases.yaml", "compression: brotli", "userConfig.compression", "want none, lz4, zlib, zstd or snappy"},
				{"functions/purchases.yaml", "batchingMaxPublishDelayMs: 1.5", "userConfig.batchingMaxPublishDelayMs", "want a whole number"},
				{"views/user_activity.yaml", "maxPendingMessages: lots", "sink.userConfig.maxPendingMessages", "want a number"},
			},
		},
		{
			name:  "ram above 1.3 times the default limit",
			edits: []edit{{"functions/purchases.yaml", "parallelism: 1", "parallelism: 1\nresources:\n  cpu: 1\n  ram: 268435456"}},
		},
		{
			name: "ram above 1.3 times a lowered limit",
			edits: []edit{{"functions/purchases.yaml", "parallelism: 1", "parallelism: 1\nresources:\n  ram: 134217728"},
				{"functions/purchases.yaml", "  retryBackoffMs: 200", "  retryBackoffMs: 200\n  memoryLimitMB: 96\n  gcPercent: 200"}},
		},
		{
			name:  "ram under 1.3 times the default limit",
			edits: []edit{{"functions/purchases.yaml", "parallelism: 1", "parallelism: 1\nresources:\n  ram: 134217728"}},
			want:  []wantProblem{{"functions/purchases.yaml", "ram: 134217728", "resources.ram", "134217728 bytes is under 1.3 × the runtime's soft memory limit (memoryLimitMB 160 MiB, the default): want at least 218103808"}},
		},
		{
			name: "ram with no soft limit",
			edits: []edit{{"functions/purchases.yaml", "parallelism: 1", "parallelism: 1\nresources:\n  ram: 1073741824"},
				{"functions/purchases.yaml", "  retryBackoffMs: 200", "  retryBackoffMs: 200\n  memoryLimitMB: 0"}},
			want: []wantProblem{{"functions/purchases.yaml", "ram: 1073741824", "resources.ram", "userConfig.memoryLimitMB is 0 (no soft limit)"}},
		},
		{
			name: "bad collector settings, each at its line",
			edits: []edit{{"functions/purchases.yaml", "  retryBackoffMs: 200", "  retryBackoffMs: 200\n  gcPercent: -5\n  memoryLimitMB: lots\n  maxProcs: -1"},
				{"views/user_activity.yaml", "    batch_size: 1000", "    batch_size: 1000\n    memoryLimitMB: 1.5"}},
			want: []wantProblem{
				{"functions/purchases.yaml", "gcPercent: -5", "userConfig.gcPercent", "want a whole number from 0"},
				{"functions/purchases.yaml", "memoryLimitMB: lots", "userConfig.memoryLimitMB", `want a number, got "lots"`},
				{"functions/purchases.yaml", "maxProcs: -1", "userConfig.maxProcs", "want a whole number from 0"},
				{"views/user_activity.yaml", "memoryLimitMB: 1.5", "sink.userConfig.memoryLimitMB", "want a whole number from 0"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantExactly(t, tc.edits, tc.want) })
	}
}
