package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/foldline/foldline/admin/manifest"
)

// FailoverDelaySetting is the broker setting that delays handing a
// partition of a failover subscription to another consumer.
const FailoverDelaySetting = "activeConsumerFailoverDelayTimeMillis"

// ErrFailoverDelay is returned when functions would run several instances on
// failover subscriptions of a broker that delays the handover of a
// partition: Pulsar 4.0.8's dispatcher can then start the new consumer
// after the last message the old one was sent and lose the rewind that
// would give it the old one's unacknowledged messages again. The old
// consumer, still running, finishes those, and their outputs land after
// the new consumer's outputs of later ones: an operation behind a later
// one of its ledger partition, which the sink skips as applied (the shop
// scaled out to 4 partitions lost orders that way). With the setting at 0
// the broker rewinds at once: the new consumer gets those messages again,
// duplicates the sink recognises, never a reordering.
var ErrFailoverDelay = errors.New("the broker delays failover handovers, which can reorder a scaled-out function's outputs")

// checkFailoverHandover returns ErrFailoverDelay when functions run
// several instances (scaled, as scaledFunctions names them) and the
// broker's runtime config (conf, as the admin API returns it, or readErr)
// does not set FailoverDelaySetting to 0, or a note to add to the plan when
// the config could not be read.
func checkFailoverHandover(scaled []string, conf map[string]string, readErr error) (*Change, error) {
	if len(scaled) == 0 {
		return nil, nil
	}
	fix := fmt.Sprintf("set %s=0 in every broker's config (broker.conf, or standalone.conf) and restart them", FailoverDelaySetting)
	if readErr != nil {
		return &Change{Action: Note, Kind: "broker", Name: FailoverDelaySetting, Details: []string{
			fmt.Sprintf("not read (%v); %s run several instances on failover subscriptions and stay exact only if it is 0: %s", readErr, strings.Join(scaled, ", "), fix)}}, nil
	}
	if v, ok := conf[FailoverDelaySetting]; !ok || strings.TrimSpace(v) != "0" {
		if !ok {
			v = "unset, 1000 by default"
		}
		return nil, fmt.Errorf("%w: %s is %s, and %s run several instances on failover subscriptions: %s",
			ErrFailoverDelay, FailoverDelaySetting, v, strings.Join(scaled, ", "), fix)
	}
	return nil, nil
}

// scaledFunctions names the functions of stages that run several instances.
func scaledFunctions(stages []*manifest.Stage) []string {
	var scaled []string
	for _, st := range stages {
		if st.Kind == manifest.StageFunction && st.Parallelism > 1 {
			scaled = append(scaled, fmt.Sprintf("%s (%d instances)", st.Name, st.Parallelism))
		}
	}
	return scaled
}

// planFailoverHandover checks the broker's failover handover for the DAG's
// scaled-out functions (checkFailoverHandover), reading the runtime config
// of the broker that answers.
func (pl *planner) planFailoverHandover(ctx context.Context) error {
	scaled := scaledFunctions(pl.graph.Order)
	if len(scaled) == 0 {
		return nil
	}
	conf, err := pl.pulsar.Admin.Brokers().GetRuntimeConfigurationsWithContext(ctx)
	note, problem := checkFailoverHandover(scaled, conf, err)
	if note != nil {
		pl.add(*note)
	}
	return problem
}
