package pf

import (
	"context"
	"errors"
)

type instanceConf struct {
	InstanceID                                   int
	Tenant, Namespace, Name, FuncID, FuncVersion string
	Inputs                                       []inputSpec
	OutputTopic                                  string
	UserConfig                                   map[string]any
}
type inputSpec struct{ Topic string }
type userStats struct{}

func (userStats) recordUserMetric(string, float64) {}

type instance struct {
	conf  instanceConf
	stats userStats
}
type outputBatch struct{}

func (i *instance) publish(context.Context, *FunctionContext, Record) error {
	return errors.New("not implemented")
}
func startMain(any) error                      { return errors.New("not implemented") }
func run(context.Context, any, []string) error { return errors.New("not implemented") }
