package manifest

import (
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// Retarget moves the whole set to another tenant and keyspace, so that tests
// and previews deploy the same manifests next to the real tenant without
// touching it. Every topic of the old tenant is renamed into the new one.
// An empty keyspace keeps the manifests' keyspace.
func (s *Set) Retarget(tenant, keyspace string) {
	if s.Tenant == nil {
		return
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
		c.UserConfig = retargetUserConfig(c.UserConfig, topic)
	}
	for _, v := range s.Views {
		v.Keyspace = keyspace
		v.Sink.Input = topic(v.Sink.Input)
		v.Sink.UserConfig = retargetUserConfig(v.Sink.UserConfig, topic)
	}
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

// KeyspaceFor turns a tenant name into a keyspace name (CQL names are lower
// case letters, digits and '_').
func KeyspaceFor(tenant string) string {
	return strings.ToLower(strings.NewReplacer("-", "_", ".", "_").Replace(tenant))
}
