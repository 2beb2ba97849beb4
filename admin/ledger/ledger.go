// Package ledger is `foldline ledger status` and `foldline ledger offload`:
// where each ledger topic's segments live — still in BookKeeper, or moved
// to tiered storage (the S3 server) — and offloading the closed segments by
// hand, waiting until the broker reports the outcome. Pulsar's own
// thresholds (namespace offload policies, set by foldline deploy from the
// tenant manifest) offload automatically; this is for doing it now and for
// seeing what happened, including the last offload error.
package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
)

// Options are the ledger commands' settings.
type Options struct {
	// Command's Dir holds the tenant manifest (its ledger topics).
	target.Command
	// Wait bounds how long offload waits for each topic's offload to end.
	Wait time.Duration
	// Poll is how often offload asks the broker for progress. Default 500ms.
	Poll time.Duration
}

// Amount is a share of a topic's segments.
type Amount struct {
	Segments int   `json:"segments"`
	Entries  int64 `json:"entries"`
	Bytes    int64 `json:"bytes"`
}

func (a *Amount) add(entries, bytes int64) {
	a.Segments++
	a.Entries += entries
	a.Bytes += bytes
}

// TopicStatus is where one ledger topic's segments are.
type TopicStatus struct {
	Topic string `json:"topic"`
	// BookKeeper holds the segments only BookKeeper has, the open one included.
	BookKeeper Amount `json:"bookkeeper"`
	// Offloaded holds the segments in tiered storage. BookKeeper keeps its
	// copy of each for the namespace's deletion lag after the offload;
	// reads go to tiered storage as soon as the offload completed.
	Offloaded Amount `json:"offloaded"`
	// Offloadable is the part of BookKeeper in closed segments: what
	// `foldline ledger offload` would move now.
	Offloadable Amount `json:"offloadable"`
	// OffloadStatus is the broker's state of the topic's last offload since
	// it loaded the topic: NOT_RUN, RUNNING, SUCCESS or ERROR.
	OffloadStatus string `json:"offloadStatus"`
	// LastError is the broker's error of a failed offload.
	LastError string `json:"lastError,omitempty"`
	// Setting names the configuration the error points at, when it is
	// recognisable.
	Setting string `json:"setting,omitempty"`
	// offloadTo is the message id before which everything is closed: the
	// first position of the open segment.
	offloadTo utils.MessageID
	// pending are the closed segments not yet offloaded.
	pending map[int64]int64
}

// Report is the status of every ledger topic of one tenant.
type Report struct {
	Tenant string        `json:"tenant"`
	Topics []TopicStatus `json:"topics"`
}

// Summarize sorts a topic's segments by where they are. The open segment
// is the last one; the broker lists it with zero entries and counts it in
// currentLedgerEntries/currentLedgerSize instead.
func Summarize(topic string, stats utils.PersistentTopicInternalStats) TopicStatus {
	st := TopicStatus{Topic: topic, pending: map[int64]int64{}}
	for i, l := range stats.Ledgers {
		open := i == len(stats.Ledgers)-1 && stats.State != "Closed" && l.Entries == 0
		switch {
		case open:
			st.BookKeeper.add(stats.CurrentLedgerEntries, stats.CurrentLedgerSize)
			st.offloadTo = utils.MessageID{LedgerID: l.LedgerID, EntryID: 0, PartitionIndex: -1}
		case l.Offloaded:
			st.Offloaded.add(l.Entries, l.Size)
		default:
			st.BookKeeper.add(l.Entries, l.Size)
			st.Offloadable.add(l.Entries, l.Size)
			st.pending[l.LedgerID] = l.Size
		}
	}
	return st
}

// Status reads where every ledger topic of the manifests' tenant is.
func Status(ctx context.Context, opts Options) (*Report, error) {
	c, err := connect(opts)
	if err != nil {
		return nil, err
	}
	report := &Report{Tenant: c.tenant}
	for _, topic := range c.topics {
		st, err := c.topicStatus(ctx, topic)
		if err != nil {
			return nil, err
		}
		report.Topics = append(report.Topics, st)
	}
	return report, nil
}

// cluster is what both commands work on: the admin clients, the tenant and
// its ledger topics (partitions expanded).
type cluster struct {
	opts   Options
	pulsar *pulsarx.Clients
	tenant string
	topics []*utils.TopicName
}

func connect(opts Options) (*cluster, error) {
	set, err := opts.Target.Load(opts.Dir)
	if err != nil {
		return nil, err
	}
	if set.Tenant == nil {
		return nil, fmt.Errorf("reading manifests in %s: no Tenant manifest, so no ledger topics", opts.Dir)
	}
	clients, err := pulsarx.Connect(opts.Services)
	if err != nil {
		return nil, err
	}
	c := &cluster{opts: opts, pulsar: clients, tenant: set.Tenant.Name}
	ctx, cancel := context.WithTimeout(context.Background(), pulsarx.Timeout)
	defer cancel()
	for _, decl := range set.Tenant.Ledger {
		name, err := utils.GetTopicName(decl.Name)
		if err != nil {
			return nil, fmt.Errorf("parsing ledger topic %s: %w", decl.Name, err)
		}
		meta, err := clients.Admin.Topics().GetMetadataWithContext(ctx, *name)
		switch {
		case pulsarx.IsNotFound(err):
			return nil, pulsarx.UnknownTenant(c.tenant)
		case err != nil:
			return nil, fmt.Errorf("reading partitions of ledger topic %s: %w", name, err)
		}
		if meta.Partitions == 0 {
			c.topics = append(c.topics, name)
			continue
		}
		for i := 0; i < meta.Partitions; i++ {
			part, err := name.GetPartition(i)
			if err != nil {
				return nil, fmt.Errorf("naming partition %d of %s: %w", i, name, err)
			}
			c.topics = append(c.topics, part)
		}
	}
	return c, nil
}

func (c *cluster) topicStatus(ctx context.Context, topic *utils.TopicName) (TopicStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, pulsarx.Timeout)
	defer cancel()
	stats, err := c.pulsar.Admin.Topics().GetInternalStatsWithContext(ctx, *topic)
	if err != nil {
		if pulsarx.IsNotFound(err) {
			return TopicStatus{}, fmt.Errorf("reading segments of %s: the topic does not exist (ingest creates it): %w", topic, err)
		}
		return TopicStatus{}, fmt.Errorf("reading segments of %s: %w", topic, err)
	}
	st := Summarize(topic.String(), stats)
	offload, err := c.pulsar.Admin.Topics().OffloadStatusWithContext(ctx, *topic)
	if err != nil {
		return TopicStatus{}, fmt.Errorf("reading offload status of %s: %w", topic, err)
	}
	st.OffloadStatus = string(offload.Status)
	st.LastError = offload.LastError
	if st.LastError != "" {
		st.Setting = SettingOf(st.LastError)
	}
	return st, nil
}
