// Package tenantid derives who a tenant is on the cluster: one role name
// for Pulsar and Cassandra, the tenant's Pulsar token (an HS256 JWT whose
// subject is the role, signed with the key the brokers validate tokens
// with) and its Cassandra password. Both secrets are derived from the
// signing key with HMAC-SHA256, so deploy recomputes the same ones on every
// run and nothing needs storing; whoever holds the key can mint any token,
// the superuser's included, so it already guards everything they guard.
package tenantid

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrShortKey is returned for a signing key under 256 bits, which Pulsar
// refuses for HS256.
var ErrShortKey = errors.New("the token signing key is shorter than 32 bytes")

// Identity is a tenant's identity.
type Identity struct {
	// Role is the tenant's Pulsar role (its token's subject, an admin role
	// of the tenant) and its Cassandra role: "tenant-" + the tenant's name.
	Role string
	// PulsarToken authenticates as Role to Pulsar.
	PulsarToken string
	// CassandraPassword logs Role in to Cassandra.
	CassandraPassword string
}

// RoleFor names the role of a tenant.
func RoleFor(tenant string) string { return "tenant-" + tenant }

// ReadKey reads a signing key file: the raw bytes, as `pulsar tokens
// create-secret-key` and scripts/stack write it.
func ReadKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the token signing key: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("reading the token signing key %s: %w", path, ErrShortKey)
	}
	return key, nil
}

// Derive returns tenant's identity under key.
func Derive(key []byte, tenant string) Identity {
	role := RoleFor(tenant)
	return Identity{
		Role:              role,
		PulsarToken:       Sign(key, role),
		CassandraPassword: b64(mac(key, []byte("foldline cassandra password\x00"+role))),
	}
}

// Sign returns an HS256 JWT with subject sub and no expiry, the token
// `pulsar tokens create --secret-key … --subject sub` makes.
func Sign(key []byte, sub string) string {
	header, _ := json.Marshal(map[string]string{"alg": "HS256"})
	claims, _ := json.Marshal(map[string]string{"sub": sub})
	signing := b64(header) + "." + b64(claims)
	return signing + "." + b64(mac(key, []byte(signing)))
}

func mac(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
