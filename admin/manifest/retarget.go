package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/internal/cqlname"
)

// Retarget moves the whole set to another tenant and keyspace, so that tests
// and previews deploy the same manifests next to the real tenant without
// touching it. Every topic of the old tenant is renamed into the new one,
// in every field that names one. An empty keyspace keeps the manifests'
// keyspace. It returns the problems of the moved set (a Problems error):
// a keyspace that is not the new tenant's, or a topic left in another
// tenant.
func (s *Set) Retarget(tenant, keyspace string) error {
	if s.Tenant == nil {
		return nil
	}
	old := s.Tenant.Name
	if tenant == "" {
		tenant = old
	}
	if keyspace == "" {
		keyspace = s.Tenant.Keyspace
	}
	topic := func(name string) string { return retargetTopic(name, old, tenant) }
	s.Tenant.Name, s.Tenant.Keyspace = tenant, keyspace
	for i := range s.Tenant.Ledger {
		s.Tenant.Ledger[i].Name = topic(s.Tenant.Ledger[i].Name)
	}
	for _, p := range s.Pipelines {
		for i := range p.Topics {
			p.Topics[i].Name = topic(p.Topics[i].Name)
		}
	}
	for _, f := range s.Functions {
		c := &f.Config
		if c.Tenant == old {
			c.Tenant = tenant
		}
		for i := range c.Inputs {
			c.Inputs[i] = topic(c.Inputs[i])
		}
		c.Output = topic(c.Output)
		c.LogTopic = topic(c.LogTopic)
		c.DeadLetterTopic = topic(c.DeadLetterTopic)
		if c.TopicsPattern != nil {
			pattern := topic(*c.TopicsPattern)
			c.TopicsPattern = &pattern
		}
		c.CustomSchemaInputs = retargetKeys(c.CustomSchemaInputs, topic)
		c.CustomSerdeInputs = retargetKeys(c.CustomSerdeInputs, topic)
		c.InputSpecs = retargetKeys(c.InputSpecs, topic)
		c.UserConfig = retargetUserConfig(c.UserConfig, topic)
	}
	for _, v := range s.Views {
		v.Keyspace = keyspace
		v.Sink.Input = topic(v.Sink.Input)
		if v.From != nil {
			v.From.Input = topic(v.From.Input)
		}
		v.Sink.UserConfig = retargetUserConfig(v.Sink.UserConfig, topic)
	}
	return s.check().Err()
}

// retargetKeys renames the topics that key a function config's map.
func retargetKeys[V any](m map[string]V, topic func(string) string) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[topic(k)] = v
	}
	return out
}

func retargetUserConfig(uc map[string]any, topic func(string) string) map[string]any {
	if dlt, ok := uc[UserConfigDeadLetterTopic].(string); ok {
		uc[UserConfigDeadLetterTopic] = topic(dlt)
	}
	return uc
}

// retargetTopic renames a full topic name of tenant old into tenant new.
func retargetTopic(name, old, new string) string {
	tn, err := utils.GetTopicName(name)
	if err != nil || tn.GetTenant() != old || !strings.Contains(name, "://") {
		return name
	}
	domain, rest, _ := strings.Cut(name, "://")
	return domain + "://" + new + strings.TrimPrefix(rest, old)
}

// ErrTenantName is what CheckTenantName's errors are (errors.Is).
var ErrTenantName = errors.New("not a Foldline tenant name")

// tenantPattern is the form of a tenant name: its keyspace is the name with
// '-' as '_', a one-to-one mapping because '_' is not allowed here (a-b,
// a.b, a_b and A-B would otherwise share one keyspace).
var tenantPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// CheckTenantName returns an error (ErrTenantName) for a name that is not
// lower-case letters, digits and '-', starting with a letter, at most
// cqlname.MaxLength characters, or whose keyspace would be one of
// Cassandra's own (system…) or Foldline's (SystemKeyspace).
func CheckTenantName(tenant string) error {
	switch {
	case len(tenant) > cqlname.MaxLength || !tenantPattern.MatchString(tenant):
		return fmt.Errorf("%q: want lower-case letters, digits and '-', starting with a letter, at most %d characters (the keyspace is the name with - as _): %w",
			tenant, cqlname.MaxLength, ErrTenantName)
	case strings.HasPrefix(tenant, "system"):
		return fmt.Errorf("%q: its keyspace would be one of Cassandra's own (system…): %w", tenant, ErrTenantName)
	case KeyspaceFor(tenant) == SystemKeyspace:
		return fmt.Errorf("%q: its keyspace would be Foldline's own (%s): %w", tenant, SystemKeyspace, ErrTenantName)
	}
	return nil
}

// SystemKeyspace is Foldline's own keyspace, which no tenant's is: deploy
// keeps there what must outlive a tenant (how many times a tenant name was
// purged, see package deploy).
const SystemKeyspace = "foldline"

// KeyspaceFor returns a tenant's keyspace: its name with '-' as '_'. For
// names CheckTenantName accepts, two tenants never get one keyspace.
func KeyspaceFor(tenant string) string {
	return strings.ReplaceAll(tenant, "-", "_")
}
