// Package tenantid derives who a tenant is on the cluster: one role name
// for Pulsar and Cassandra, the tenant's Pulsar token (an HS256 JWT whose
// subject is the role, signed with the key the brokers validate tokens
// with) and its Cassandra password. Both secrets are derived from the
// signing key with HMAC-SHA256, so deploy recomputes the same ones on every
// run and nothing needs storing; whoever holds the key can mint any token,
// the superuser's included, so it already guards everything they guard.
//
// The role also carries the tenant name's generation: how many times a
// tenant of that name was purged (deploy keeps the count on the cluster).
// A tenant purged and deployed again under the same name so gets a role,
// a token and a password of its own, none of which the old tenant's
// holders have: their token names a role that is no admin of the new
// tenant, their login a role that purge dropped.
package tenantid

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrShortKey is returned for a signing key under 256 bits, which Pulsar
// refuses for HS256.
var ErrShortKey = errors.New("the token signing key is shorter than 32 bytes")

// Identity is a tenant's identity.
type Identity struct {
	// Role is the tenant's Pulsar role (its token's subject, an admin role
	// of the tenant) and its Cassandra role (RoleFor).
	Role string
	// PulsarToken authenticates as Role to Pulsar.
	PulsarToken string
	// CassandraPassword logs Role in to Cassandra.
	CassandraPassword string
}

// RoleFor names the role of a tenant of the given generation: "tenant-"
// and the tenant's name, then, from the first purge of that name on, "_"
// and the generation. A tenant name has no "_" (manifest.CheckTenantName),
// so no two tenants or generations share a role.
func RoleFor(tenant string, generation int) string {
	if generation == 0 {
		return "tenant-" + tenant
	}
	return "tenant-" + tenant + "_" + strconv.Itoa(generation)
}

// IsRoleOf reports whether role is the role of tenant in some generation.
func IsRoleOf(role, tenant string) bool {
	rest, ok := strings.CutPrefix(role, RoleFor(tenant, 0))
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	gen, ok := strings.CutPrefix(rest, "_")
	n, err := strconv.Atoi(gen)
	return ok && err == nil && n > 0 && strconv.Itoa(n) == gen
}

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

// Derive returns the identity under key of tenant's given generation.
func Derive(key []byte, tenant string, generation int) Identity {
	role := RoleFor(tenant, generation)
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
