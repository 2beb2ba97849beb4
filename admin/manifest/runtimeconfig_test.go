package manifest_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/foldline/foldline/admin/manifest"
)

func TestLoadChecksTheRuntimeClientSettings(t *testing.T) {
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyShopManifests(t)
			for _, e := range tc.edits {
				applyEdit(t, dir, e)
			}
			_, err := manifest.Load(dir)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			var problems manifest.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Load error = %v, want problems", err)
			}
			for _, w := range tc.want {
				file := filepath.Join(dir, w.file)
				if !hasProblem(problems, file, lineOf(t, file, w.at), w.field, w.message) {
					t.Errorf("missing problem %s: %s: …%s…\ngot:\n%v", w.file, w.field, w.message, problems)
				}
			}
			if len(problems) != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(problems), len(tc.want), problems)
			}
		})
	}
}
