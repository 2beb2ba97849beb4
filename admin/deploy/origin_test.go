package deploy

import (
	"reflect"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
)

// A stage writes its origin as one property only when every function that
// reads its output reads that form: through an upgrade, a stage whose
// reader still runs the old runtime keeps two, and says which reader holds
// it back.
func TestSingleOriginWriters(t *testing.T) {
	const valid, ops = "persistent://shop/pipeline/valid", "persistent://shop/pipeline/ops"
	stage := func(name, output string) *manifest.Stage {
		return &manifest.Stage{Tenant: "shop", Namespace: "pipeline", Name: name, Output: output}
	}
	stages := []*manifest.Stage{stage("validate", valid), stage("user-activity", ops), stage("sink", "")}
	deployed := func(readsSingle bool) []originReader {
		return []originReader{
			{name: "shop/pipeline/validate", inputs: []string{"persistent://shop/ledger/events"}, readsSingle: readsSingle},
			{name: "shop/pipeline/user-activity", inputs: []string{valid}, readsSingle: readsSingle},
			{name: "shop/pipeline/sink", inputs: []string{ops}, readsSingle: readsSingle},
		}
	}
	all := map[string]bool{"shop/pipeline/validate": true, "shop/pipeline/user-activity": true, "shop/pipeline/sink": true}
	tests := []struct {
		name       string
		readers    []originReader
		wantSingle map[string]bool
		wantHeld   map[string][]string
	}{
		{name: "a new tenant: nothing deployed", readers: nil, wantSingle: all, wantHeld: map[string][]string{}},
		{name: "deployed by this version", readers: deployed(true), wantSingle: all, wantHeld: map[string][]string{}},
		{name: "upgrading: the old readers hold their writers back", readers: deployed(false),
			wantSingle: map[string]bool{"shop/pipeline/sink": true},
			wantHeld:   map[string][]string{"shop/pipeline/validate": {"shop/pipeline/user-activity"}, "shop/pipeline/user-activity": {"shop/pipeline/sink"}}},
		{name: "an old function no manifest declares reads valid", readers: append(deployed(true),
			originReader{name: "shop/pipeline/audit", inputs: []string{valid}}),
			wantSingle: map[string]bool{"shop/pipeline/user-activity": true, "shop/pipeline/sink": true},
			wantHeld:   map[string][]string{"shop/pipeline/validate": {"shop/pipeline/audit"}}},
		{name: "an old function reading by pattern holds back every stage", readers: append(deployed(true), originReader{name: "shop/pipeline/tap", anyTopic: true}),
			wantSingle: map[string]bool{},
			wantHeld: map[string][]string{"shop/pipeline/validate": {"shop/pipeline/tap"}, "shop/pipeline/user-activity": {"shop/pipeline/tap"},
				"shop/pipeline/sink": {"shop/pipeline/tap"}}},
		{name: "a new function reading by pattern reads both", readers: append(deployed(true), originReader{name: "shop/pipeline/tap", anyTopic: true, readsSingle: true}),
			wantSingle: all, wantHeld: map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			single, held := singleOriginWriters(stages, tt.readers)
			if !reflect.DeepEqual(single, tt.wantSingle) || !reflect.DeepEqual(held, tt.wantHeld) {
				t.Errorf("single %v, held %v; want %v, %v", single, held, tt.wantSingle, tt.wantHeld)
			}
		})
	}
}

// A deployed function reads the single origin property when deploy set the
// key (either value); it reads every topic when it reads by pattern.
func TestDeployedReader(t *testing.T) {
	pattern := "persistent://shop/pipeline/.*"
	tests := []struct {
		name string
		conf utils.FunctionConfig
		want originReader
	}{
		{name: "old, by inputs", conf: utils.FunctionConfig{Inputs: []string{"a"}, UserConfig: map[string]any{"maxRetries": 3}},
			want: originReader{name: "f", inputs: []string{"a"}}},
		{name: "new, pair", conf: utils.FunctionConfig{Inputs: []string{"a"}, UserConfig: map[string]any{pf.UserConfigOriginProperty: "pair"}},
			want: originReader{name: "f", inputs: []string{"a"}, readsSingle: true}},
		{name: "old, by input specs", conf: utils.FunctionConfig{InputSpecs: map[string]utils.ConsumerConfig{"b": {}}},
			want: originReader{name: "f", inputs: []string{"b"}}},
		{name: "old, a regex input spec", conf: utils.FunctionConfig{InputSpecs: map[string]utils.ConsumerConfig{pattern: {RegexPattern: true}}},
			want: originReader{name: "f", inputs: []string{pattern}, anyTopic: true}},
		{name: "old, a topics pattern", conf: utils.FunctionConfig{TopicsPattern: &pattern},
			want: originReader{name: "f", anyTopic: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deployedReader("f", &tt.conf); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
