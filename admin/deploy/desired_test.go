package deploy

import (
	"maps"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

func TestFingerprintChangesWithBinaryOrConfigOnly(t *testing.T) {
	base := utils.FunctionConfig{
		Tenant: "shop", Namespace: "pipeline", Name: "validate", Parallelism: 1,
		Inputs:     []string{"persistent://shop/ledger/events"},
		UserConfig: map[string]any{UserConfigBinary: "aaaa", "maxRetries": 3},
	}
	with := func(change func(c *utils.FunctionConfig)) utils.FunctionConfig {
		c := base
		c.UserConfig = maps.Clone(base.UserConfig)
		change(&c)
		return c
	}
	baseFP, err := fingerprint(base)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		config   utils.FunctionConfig
		wantSame bool
	}{
		{"same config", with(func(*utils.FunctionConfig) {}), true},
		{"its own fingerprint does not count", with(func(c *utils.FunctionConfig) { c.UserConfig[UserConfigFingerprint] = "x" }), true},
		{"other binary", with(func(c *utils.FunctionConfig) { c.UserConfig[UserConfigBinary] = "bbbb" }), false},
		{"other parallelism", with(func(c *utils.FunctionConfig) { c.Parallelism = 2 }), false},
		{"other user config", with(func(c *utils.FunctionConfig) { c.UserConfig["maxRetries"] = 4 }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp, err := fingerprint(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			if same := fp == baseFP; same != tc.wantSame {
				t.Errorf("fingerprint same = %v, want %v", same, tc.wantSame)
			}
		})
	}
}

func TestCompressOutputsKeepsAConfigsOwnChoice(t *testing.T) {
	cases := []struct {
		name string
		conf utils.FunctionConfig
		want any
	}{
		{"no choice", utils.FunctionConfig{UserConfig: map[string]any{}}, DeployedCompression},
		{"user config", utils.FunctionConfig{UserConfig: map[string]any{pf.UserConfigCompression: "none"}}, "none"},
		{"producer config", utils.FunctionConfig{UserConfig: map[string]any{}, ProducerConfig: &utils.ProducerConfig{CompressionType: "ZSTD"}}, nil},
		{"producer config without compression", utils.FunctionConfig{UserConfig: map[string]any{}, ProducerConfig: &utils.ProducerConfig{}}, DeployedCompression},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compressOutputs(&tc.conf)
			if got := tc.conf.UserConfig[pf.UserConfigCompression]; got != tc.want {
				t.Fatalf("%s = %v, want %v", pf.UserConfigCompression, got, tc.want)
			}
		})
	}
}

// A stateful function gets statefulMemoryLimitMB unless its config sets a
// limit, or its resources.ram would not hold that one (it keeps the
// runtime's default, which lint checked it against).
func TestStatefulFunctionsGetARoomierMemoryLimit(t *testing.T) {
	tenant := &manifest.Tenant{Name: "shop", Keyspace: "shop"}
	cases := []struct {
		name string
		uc   map[string]any
		res  *utils.Resources
		want any
	}{
		{"no limit, no ram", map[string]any{}, nil, statefulMemoryLimitMB},
		{"its own limit", map[string]any{pf.UserConfigMemoryLimitMB: 200}, nil, 200},
		{"ram that holds it", map[string]any{}, &utils.Resources{RAM: 1 << 30}, statefulMemoryLimitMB},
		{"ram that does not", map[string]any{}, &utils.Resources{RAM: 300 << 20}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &manifest.Function{Config: utils.FunctionConfig{Name: "dedup", UserConfig: tc.uc, Resources: tc.res}}
			st := &manifest.Stage{Name: "dedup", Function: f, Stateful: true}
			conf := utils.FunctionConfig{UserConfig: maps.Clone(tc.uc), Resources: tc.res}
			setStateTable(&conf, st, tenant, "127.0.0.1:9042")
			if got := conf.UserConfig[pf.UserConfigMemoryLimitMB]; got != tc.want {
				t.Fatalf("%s = %v, want %v", pf.UserConfigMemoryLimitMB, got, tc.want)
			}
		})
	}
}
