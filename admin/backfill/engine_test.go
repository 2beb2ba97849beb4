package backfill

import (
	"errors"
	"testing"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

func TestChooseEngine(t *testing.T) {
	for _, tc := range []struct {
		engine  string
		entries int64
		want    string
	}{
		{"", 10, EngineDeployed},
		{EngineAuto, fusedFromEntries - 1, EngineDeployed},
		{EngineAuto, fusedFromEntries, EngineFused},
		{EngineDeployed, 1 << 20, EngineDeployed},
		{EngineFused, 1, EngineFused},
		{EngineCluster, 1 << 20, EngineCluster},
	} {
		if got, err := chooseEngine(tc.engine, tc.entries); err != nil || got != tc.want {
			t.Errorf("chooseEngine(%q, %d) = %q, %v; want %q", tc.engine, tc.entries, got, err, tc.want)
		}
	}
	if _, err := chooseEngine("turbo", 1); !errors.Is(err, exitcode.ErrUsage) {
		t.Errorf("an unknown engine: %v, want a usage error", err)
	}
}
