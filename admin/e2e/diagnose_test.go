package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// subscriptionReport describes every subscription on the tenant's topics
// (type, backlog, consumers with their permits and unacknowledged
// messages), so that a view that stops short of the fold shows which stage
// stalled and how.
func (s *shop) subscriptionReport(t testing.TB) string {
	admin := s.pulsarAdmin(t)
	var b strings.Builder
	for _, namespace := range []string{"ledger", "pipeline"} {
		ns, err := utils.GetNameSpaceName(s.tenant, namespace)
		if err != nil {
			return fmt.Sprintf("(no subscription report: %v)", err)
		}
		_, topics, err := admin.Topics().List(*ns)
		if err != nil {
			fmt.Fprintf(&b, "listing topics of %s: %v\n", ns, err)
			continue
		}
		slices.Sort(topics)
		for _, name := range topics {
			topic, err := utils.GetTopicName(name)
			if err != nil {
				continue
			}
			stats, err := admin.Topics().GetStats(*topic)
			if err != nil {
				fmt.Fprintf(&b, "%s: %v\n", name, err)
				continue
			}
			for sub, ss := range stats.Subscriptions {
				fmt.Fprintf(&b, "%s [%s] %s: backlog %d, out %d, delayed %d, blocked %v\n",
					topic.GetLocalName(), sub, ss.SubType, ss.MsgBacklog, ss.MsgOutCounter, ss.MsgDelayed, ss.BlockedSubscriptionOnUnackedMsgs)
				for _, c := range ss.Consumers {
					fmt.Fprintf(&b, "    consumer %s: permits %d, unacked %d, out %d, since %s\n",
						c.ConsumerName, c.AvailablePermits, c.UnAckedMessages, c.MsgOutCounter, c.ConnectedSince)
				}
			}
		}
	}
	return b.String()
}
