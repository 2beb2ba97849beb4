package deploy

import (
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/manifest"
)

func TestStageOfALeftoverFunction(t *testing.T) {
	conf := utils.FunctionConfig{Tenant: "t", Namespace: "pipeline", Name: "steal",
		Inputs: []string{"persistent://t/a/x"},
		InputSpecs: map[string]utils.ConsumerConfig{
			"persistent://t/a/z":  {},
			"persistent://t/a/x":  {},
			"persistent://t/a/.*": {RegexPattern: true},
			"persistent://t/a/y":  {},
		}}
	st := stageOf(conf)
	if want := []string{"persistent://t/a/x", "persistent://t/a/y", "persistent://t/a/z"}; !slices.Equal(st.Inputs, want) {
		t.Errorf("inputs %v, want %v (named topics once, no pattern)", st.Inputs, want)
	}
	if st.SubName != "t/pipeline/steal" || st.FullName() != "t/pipeline/steal" {
		t.Errorf("subscription %q of %q, want the worker's default t/pipeline/steal", st.SubName, st.FullName())
	}
	conf.SubName = "own"
	if st := stageOf(conf); st.SubName != "own" {
		t.Errorf("subscription %q, want own", st.SubName)
	}
}

func TestDeleteStagesOrderEachStageOnce(t *testing.T) {
	st := func(name string) *manifest.Stage {
		return &manifest.Stage{Tenant: "t", Namespace: "pipeline", Name: name}
	}
	// An old path, then an earlier backfill's stages that repeat it in
	// part (as a backfill's retire lists them).
	got := downstreamFirst([]*manifest.Stage{st("validate"), st("activity"), st("sink-v1"), st("validate"), st("activity-bf-v2"), st("sink-v1")})
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := []string{"sink-v1", "activity-bf-v2", "validate", "activity"}; !slices.Equal(names, want) {
		t.Errorf("deleted %v, want %v: downstream first, each once", names, want)
	}
}
