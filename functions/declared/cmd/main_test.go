package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/foldline/foldline/functions/declared"
)

// instanceArgs is the command line the functions worker gives an instance
// with userConfig.
func instanceArgs(t *testing.T, userConfig map[string]any) []string {
	t.Helper()
	uc, err := json.Marshal(userConfig)
	if err != nil {
		t.Fatal(err)
	}
	details, err := json.Marshal(map[string]any{
		"tenant": "shop", "namespace": "pipeline", "name": "sku_units_1d-declared",
		"source":     map[string]any{"inputSpecs": map[string]any{"persistent://shop/pipeline/valid": map[string]any{}}},
		"userConfig": string(uc),
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{"pulsarServiceURL": "pulsar://127.0.0.1:6650", "port": 1, "metricsPort": 2, "functionDetails": string(details)})
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-instance-conf", string(conf)}
}

// TestReadProgram: the instance reads its spec before it starts, and
// refuses to start (main exits) on a spec it cannot run.
func TestReadProgram(t *testing.T) {
	spec := `{"view":"sku_units_1d","filter":{"type":["purchase"]},"key":{"column":"sku","type":"text","field":"sku"},"columns":[{"name":"units_1d","type":"bigint","aggregate":"sum","value":"qty"}]}`
	p, err := readProgram(instanceArgs(t, map[string]any{declared.UserConfigSpec: spec, "deadLetterTopic": "persistent://shop/pipeline/sku_units_1d-declared-dlq"}))
	if err != nil {
		t.Fatalf("readProgram: %v", err)
	}
	if got := p.Spec().View; got != "sku_units_1d" {
		t.Errorf("view %q, want sku_units_1d", got)
	}
	bad := strings.Replace(spec, `"sum"`, `"average"`, 1)
	if _, err := readProgram(instanceArgs(t, map[string]any{declared.UserConfigSpec: bad})); err == nil || !strings.Contains(err.Error(), `columns[0].aggregate: "average"`) {
		t.Errorf("readProgram of a bad spec = %v, want the aggregate's problem", err)
	}
	if _, err := readProgram(instanceArgs(t, map[string]any{})); err == nil || !strings.Contains(err.Error(), declared.UserConfigSpec) {
		t.Errorf("readProgram without a spec = %v, want an error naming %s", err, declared.UserConfigSpec)
	}
}
