package deploy

import (
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
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
