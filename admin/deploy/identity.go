package deploy

import (
	"maps"

	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/sinks/cassandra"
)

// identity is who a tenant's functions run as: the credentials deploy puts
// into every function's secrets (never its user config, which whoever may
// read the function's config sees).
type identity struct {
	// PulsarToken is the functions' Pulsar token, the function secret
	// "token" the runtime (functions/pf) connects with; "" gives none.
	PulsarToken string
	// CassandraUser and CassandraPassword log the sink in to Cassandra
	// ("" user: no login).
	CassandraUser, CassandraPassword string
}

// deployerIdentity is the deployer's own Cassandra login, for the sinks.
func deployerIdentity(svc services.Services) (identity, error) {
	user, password, err := svc.CassandraCredentials()
	if err != nil {
		return identity{}, err
	}
	return identity{CassandraUser: user, CassandraPassword: password}, nil
}

// secrets are the function secrets of a function (sink: a view's sink).
func (id identity) secrets(sink bool) map[string]any {
	s := map[string]any{}
	if id.PulsarToken != "" {
		s["token"] = id.PulsarToken
	}
	if sink && id.CassandraUser != "" {
		maps.Copy(s, map[string]any{cassandra.SecretUsername: id.CassandraUser, cassandra.SecretPassword: id.CassandraPassword})
	}
	if len(s) == 0 {
		return nil
	}
	return s
}
