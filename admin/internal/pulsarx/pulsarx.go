// Package pulsarx builds the pulsaradmin clients the admin commands use and
// classifies their errors. Two clients are needed: the broker's admin API
// lives under /admin/v2, while a Go function's binary is uploaded only
// through /admin/v3/functions (with the default version the broker answers
// 400 "Cannot invoke String.length()").
package pulsarx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/internal/services"
)

// Clients talk to one Pulsar cluster.
type Clients struct {
	// Admin is the broker admin API (tenants, namespaces, topics).
	Admin admin.Client
	// Functions is the functions worker API (v3), which uploads binaries.
	Functions admin.Functions
	// Packages is the package management API (v3), where the worker
	// stores the binaries of functions.
	Packages admin.Packages
}

// Connect checks that Pulsar answers at s's addresses and builds the
// clients; an unreachable service gives an error that names the script
// that starts it.
func Connect(s services.Services) (*Clients, error) {
	if err := s.CheckPulsar(); err != nil {
		return nil, err
	}
	v2conf, v3conf := s.PulsarAdminConfig(), s.PulsarAdminConfig()
	v2conf.PulsarAPIVersion, v3conf.PulsarAPIVersion = config.V2, config.V3
	v2, err := admin.New(v2conf)
	if err != nil {
		return nil, fmt.Errorf("creating Pulsar admin client for %s: %w", s.PulsarAdminURL, err)
	}
	v3, err := admin.New(v3conf)
	if err != nil {
		return nil, fmt.Errorf("creating Pulsar functions client for %s: %w", s.PulsarAdminURL, err)
	}
	return &Clients{Admin: v2, Functions: v3.Functions(), Packages: v3.Packages()}, nil
}

// ConnectTenant is Connect for a command on one tenant: it also checks that
// the tenant exists (UnknownTenant's error when not).
func ConnectTenant(ctx context.Context, s services.Services, tenant string) (*Clients, error) {
	c, err := Connect(s)
	if err != nil {
		return nil, err
	}
	if err := c.RequireTenant(ctx, tenant); err != nil {
		return nil, err
	}
	return c, nil
}

// RequireTenant returns UnknownTenant's error when tenant does not exist.
func (c *Clients) RequireTenant(ctx context.Context, tenant string) error {
	if _, err := c.Admin.Tenants().GetWithContext(ctx, tenant); err != nil {
		if IsNotFound(err) {
			return UnknownTenant(tenant)
		}
		return fmt.Errorf("reading tenant %s: %w", tenant, err)
	}
	return nil
}

// Timeout bounds one admin request so that a hung broker fails a command
// instead of freezing it.
const Timeout = 2 * time.Minute

// StatusCode returns the HTTP status of a Pulsar admin error, 0 for other
// errors.
func StatusCode(err error) int {
	var restErr rest.Error
	if errors.As(err, &restErr) {
		return restErr.Code
	}
	var restErrPtr *rest.Error
	if errors.As(err, &restErrPtr) {
		return restErrPtr.Code
	}
	return 0
}

// IsNotFound reports whether Pulsar answered 404.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsConflict reports whether Pulsar answered 409 (already exists).
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// UnknownTenant is the error for a tenant that does not exist.
func UnknownTenant(tenant string) error {
	return fmt.Errorf("tenant %s does not exist: deploy it with foldline deploy (or name another with --tenant): %w", tenant, exitcode.ErrNotFound)
}

// Subscription returns the stats of subscription sub on topic (added up
// over the partitions of a partitioned topic); ok is false when the topic or
// the subscription does not exist.
func Subscription(ctx context.Context, c *Clients, topic, sub string) (stats utils.SubscriptionStats, ok bool, err error) {
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		return stats, false, fmt.Errorf("naming topic %s: %w", topic, err)
	}
	var subs map[string]utils.SubscriptionStats
	topicStats, err := c.Admin.Topics().GetStatsWithContext(ctx, *tn)
	switch {
	case err == nil:
		subs = topicStats.Subscriptions
	case IsNotFound(err):
		// Perhaps partitioned: the partitioned stats add up the partitions.
		pstats, perr := c.Admin.Topics().GetPartitionedStatsWithContext(ctx, *tn, false)
		switch {
		case IsNotFound(perr):
			return stats, false, nil
		case perr != nil:
			return stats, false, fmt.Errorf("reading stats of topic %s: %w", topic, perr)
		}
		subs = pstats.Subscriptions
	default:
		return stats, false, fmt.Errorf("reading stats of topic %s: %w", topic, err)
	}
	stats, ok = subs[sub]
	return stats, ok, nil
}

// Entries returns how many entries (messages, or batches of them, as the
// broker stores them) topic holds, over all its partitions; a topic that
// does not exist holds none. Subscription backlogs count the same unit.
func Entries(ctx context.Context, c *Clients, topic string) (int64, error) {
	var total int64
	err := eachPartition(ctx, c, topic, func(_ string, stats utils.PersistentTopicInternalStats) {
		total += stats.NumberOfEntries
	})
	return total, err
}

// LastEntries returns the last entry (ledger:entry, as the broker has
// confirmed it) of topic, or of each of its partitions, by topic name; a
// topic that does not exist, or an empty one, has none.
func LastEntries(ctx context.Context, c *Clients, topic string) (map[string]string, error) {
	out := map[string]string{}
	err := eachPartition(ctx, c, topic, func(name string, stats utils.PersistentTopicInternalStats) {
		if stats.NumberOfEntries > 0 && stats.LastConfirmedEntry != "" {
			out[name] = stats.LastConfirmedEntry
		}
	})
	return out, err
}

// eachPartition calls f with the internal stats of topic, or of each of
// its partitions; a topic (or partition) that does not exist is skipped.
func eachPartition(ctx context.Context, c *Clients, topic string, f func(name string, stats utils.PersistentTopicInternalStats)) error {
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		return fmt.Errorf("naming topic %s: %w", topic, err)
	}
	meta, err := c.Admin.Topics().GetMetadataWithContext(ctx, *tn)
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("reading partitions of topic %s: %w", topic, err)
	}
	names := []string{topic}
	if err == nil && meta.Partitions > 0 {
		names = names[:0]
		for i := range meta.Partitions {
			names = append(names, fmt.Sprintf("%s-partition-%d", topic, i))
		}
	}
	for _, name := range names {
		ptn, err := utils.GetTopicName(name)
		if err != nil {
			return fmt.Errorf("naming topic %s: %w", name, err)
		}
		stats, err := c.Admin.Topics().GetInternalStatsWithContext(ctx, *ptn)
		switch {
		case IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading internal stats of topic %s: %w", name, err)
		default:
			f(name, stats)
		}
	}
	return nil
}

// NewClient connects a Pulsar client to svc with the client library's
// chatter kept out of the CLI's output (services.QuietPulsarLogger).
func NewClient(svc services.Services) (pulsar.Client, error) {
	opts := svc.PulsarClientOptions()
	opts.Logger = services.QuietPulsarLogger()
	client, err := pulsar.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", svc.PulsarURL, err)
	}
	return client, nil
}
