package deploy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/crypto/bcrypt"

	"github.com/foldline/foldline/admin/internal/tenantid"
	"github.com/foldline/foldline/internal/plainfile"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/sinks/cassandra"
)

// ErrNoSigningKey is returned when Pulsar wants credentials but deploy has
// no key to sign the tenant's token with: the tenant's functions would have
// no token of their own, and the runtime refuses to run as the worker.
var ErrNoSigningKey = errors.New("deploying to a Pulsar with authentication needs the key that signs tenants' tokens: set --pulsar-secret-key-file (FOLDLINE_PULSAR_SECRET_KEY_FILE)")

// ErrNoTenantRole is returned when Cassandra wants a login but deploy has
// no signing key to derive the tenant's own Cassandra role and password
// from: the sinks would have had to log in as the deployer, whose role
// reaches every tenant's keyspace.
var ErrNoTenantRole = errors.New("a tenant's sinks log in to Cassandra with a role of their own, derived from the token signing key: set --pulsar-secret-key-file (FOLDLINE_PULSAR_SECRET_KEY_FILE); on a Pulsar without authentication any key of 32 bytes or more will do")

// identity is who a tenant's functions run as: the credentials deploy puts
// into every function's secrets (never its user config, which whoever may
// read the function's config sees).
type identity struct {
	// Role is the tenant's own role in Pulsar and Cassandra ("" when the
	// stack runs open and there is no signing key).
	Role string
	// PulsarToken is the functions' Pulsar token, the function secret
	// "token" the runtime (functions/pf) connects with; "" gives none.
	PulsarToken string
	// CassandraUser and CassandraPassword log the sink in to Cassandra
	// ("" user: no login). They are the tenant's own role's, never the
	// deployer's.
	CassandraUser, CassandraPassword string
	// keyFile is the signing key's file, beside which deploy writes the
	// tenant's credentials.
	keyFile string
	// generation is the tenant name's (tenantGeneration).
	generation int
}

// tenantIdentity returns who tenant's functions run as. With a signing key
// the tenant gets a role of its own (tenantid), of its name's generation
// (see tenantGeneration): a Pulsar token, and, when Cassandra wants a
// login, a Cassandra role limited to the tenant's keyspace. Without a key
// the tenant has no identity at all, which withoutSigningKey allows only
// on a stack where neither Pulsar nor Cassandra wants credentials: a
// tenant never runs with the deployer's.
func tenantIdentity(ctx context.Context, svc services.Services, cql *gocql.Session, tenant string) (identity, error) {
	user := svc.CassandraUser
	if svc.PulsarSecretKeyFile == "" {
		return identity{}, withoutSigningKey(svc.PulsarAuthMethod(), user)
	}
	key, err := tenantid.ReadKey(svc.PulsarSecretKeyFile)
	if err != nil {
		return identity{}, err
	}
	generation, err := tenantGeneration(ctx, cql, tenant)
	if err != nil {
		return identity{}, err
	}
	tid := tenantid.Derive(key, tenant, generation)
	id := identity{Role: tid.Role, PulsarToken: tid.PulsarToken, keyFile: svc.PulsarSecretKeyFile, generation: generation}
	if user != "" {
		id.CassandraUser, id.CassandraPassword = tid.Role, tid.CassandraPassword
	}
	return id, nil
}

// withoutSigningKey decides whether a tenant may be deployed without a
// signing key, that is with no identity of its own: its functions then get
// no token and its sinks no Cassandra login. That is right on an open
// stack only. When deploy authenticates to Pulsar (pulsarAuth: a token,
// OAuth 2.0, a TLS client certificate), the functions would have no token
// and the runtime refuses to run with the worker's (ErrNoSigningKey); when
// it logs in to Cassandra (cassandraUser), the sinks would need a login,
// and the deployer's own is not one to hand a tenant (ErrNoTenantRole).
func withoutSigningKey(pulsarAuth, cassandraUser string) error {
	switch {
	case pulsarAuth != "":
		return fmt.Errorf("deploy authenticates to Pulsar with %s, and has no key to sign the tenant's own token with (the brokers must accept tokens signed with it): %w", pulsarAuth, ErrNoSigningKey)
	case cassandraUser != "":
		return fmt.Errorf("deploy logs in to Cassandra as %s, a login no tenant is given: %w", cassandraUser, ErrNoTenantRole)
	}
	return nil
}

// secrets are the function secrets of a function (sink: a view's sink):
// the values themselves, or, with a Kubernetes secret name, references to
// that secret's keys (see KubernetesSecret), which Pulsar's Kubernetes
// runtime binds to the instance's environment.
func (id identity) secrets(sink bool, kubernetesSecret string) map[string]any {
	values := id.secretValues(sink)
	if len(values) == 0 {
		return nil
	}
	s := make(map[string]any, len(values))
	for k, v := range values {
		if kubernetesSecret != "" {
			s[k] = map[string]any{"path": kubernetesSecret, "key": k}
		} else {
			s[k] = v
		}
	}
	return s
}

// secretValues are the secrets' values by name.
func (id identity) secretValues(sink bool) map[string]string {
	s := map[string]string{}
	if id.PulsarToken != "" {
		s["token"] = id.PulsarToken
	}
	if sink && id.CassandraUser != "" {
		maps.Copy(s, map[string]string{cassandra.SecretUsername: id.CassandraUser, cassandra.SecretPassword: id.CassandraPassword})
	}
	return s
}

// adminRoles are the tenant's admin roles: the manifest's and its own.
func (id identity) adminRoles(manifestRoles []string) []string {
	if id.Role == "" || slices.Contains(manifestRoles, id.Role) {
		return manifestRoles
	}
	return append(slices.Clone(manifestRoles), id.Role)
}

// quoteCQL quotes a CQL identifier or role name.
func quoteCQL(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// planCassandraRole plans the tenant's Cassandra role: it can log in with
// its password and holds every permission on the tenant's keyspace, and
// nothing else (no superuser, no other keyspace, no role management). It
// runs after the keyspace's creation, which the grant needs. An existing
// role keeps its password while that is the one derived from the signing
// key (Cassandra refuses changing a password twice within 5 s, and deploy
// runs often), and gets it again otherwise: after the key was rotated, or
// the password changed by hand, the sinks could not log in. The roles of
// the name's earlier generations (tenantid.RoleFor) are dropped.
func (pl *planner) planCassandraRole(ctx context.Context) error {
	id, ks := pl.identity, pl.set.Tenant.Keyspace
	if id.Role == "" || id.CassandraUser == "" {
		return nil
	}
	hash, exists, err := roleHash(ctx, pl.cql, id.Role)
	if err != nil {
		return err
	}
	var perms []string
	err = pl.cql.Query(`SELECT permissions FROM system_auth.role_permissions WHERE role = ? AND resource = ?`, id.Role, "data/"+ks).
		WithContext(ctx).Scan(&perms)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("reading the permissions of role %s: %w", id.Role, err)
	}
	grant := fmt.Sprintf("GRANT ALL PERMISSIONS ON KEYSPACE %s TO %s", quoteCQL(ks), quoteCQL(id.Role))
	create := fmt.Sprintf("CREATE ROLE IF NOT EXISTS %s WITH PASSWORD = '%s' AND LOGIN = true", quoteCQL(id.Role), id.CassandraPassword)
	details := []string{"login limited to keyspace " + ks}
	var steps []string
	if !exists {
		steps = []string{create, grant}
	} else {
		if bcrypt.CompareHashAndPassword([]byte(hash), []byte(id.CassandraPassword)) != nil {
			steps = append(steps, fmt.Sprintf("ALTER ROLE %s WITH PASSWORD = '%s' AND LOGIN = true", quoteCQL(id.Role), id.CassandraPassword))
			details = append(details, "password: not the one derived from the signing key (a new key, or changed by hand): set again")
		}
		if len(perms) == 0 {
			steps = append(steps, grant)
		}
	}
	// A purge that stopped half way can leave an earlier generation's
	// login, granted the keyspace this tenant now uses: it goes.
	roles, err := tenantRoles(ctx, pl.cql, pl.set.Tenant.Name)
	if err != nil {
		return err
	}
	for _, old := range roles {
		if old != id.Role {
			steps = append(steps, "DROP ROLE IF EXISTS "+quoteCQL(old))
			details = append(details, "drops role "+old+", the login of an earlier tenant of this name (purged)")
		}
	}
	if len(steps) == 0 {
		pl.add(Change{Action: Keep, Kind: "cassandra role", Name: id.Role})
		return nil
	}
	action := Create
	if exists {
		action = Update
	}
	pl.add(Change{Action: action, Kind: "cassandra role", Name: id.Role, Details: details,
		apply: func(ctx context.Context) error {
			for _, q := range steps {
				err := pl.cql.Query(q).WithContext(ctx).Exec()
				if err != nil && strings.Contains(err.Error(), "can only be changed every") {
					// Changed moments ago (by hand, or by another deploy):
					// Cassandra takes the next change after its 5 s.
					select {
					case <-ctx.Done():
						return fmt.Errorf("setting up role %s: %w", id.Role, ctx.Err())
					case <-time.After(passwordChangeInterval):
					}
					err = pl.cql.Query(q).WithContext(ctx).Exec()
				}
				if err != nil {
					return fmt.Errorf("setting up role %s: %w", id.Role, err)
				}
			}
			return nil
		}})
	return nil
}

// roleHash reads role's password hash from system_auth.roles (bcrypt; ""
// for a role without a password), and whether the role exists.
func roleHash(ctx context.Context, cql *gocql.Session, role string) (hash string, exists bool, err error) {
	err = cql.Query(`SELECT salted_hash FROM system_auth.roles WHERE role = ?`, role).WithContext(ctx).Scan(&hash)
	if errors.Is(err, gocql.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading role %s: %w", role, err)
	}
	return hash, true, nil
}

// passwordChangeInterval is a little more than the 5 s Cassandra 5.0 leaves
// between two changes of one role's password.
const passwordChangeInterval = 5500 * time.Millisecond

// writeCredentials writes the tenant's credentials, as FOLDLINE_*
// environment settings the foldline command reads, to
// tenants/TENANT.env beside the signing key (mode 0600, also when an
// older file had another: the file is replaced, not rewritten), and
// returns the file's path ("" when the tenant has no identity of its own).
func (id identity) writeCredentials(tenant string) (string, error) {
	if id.Role == "" {
		return "", nil
	}
	path, err := id.credentialsPath(tenant)
	if err != nil {
		return "", fmt.Errorf("writing the credentials of tenant %q: %w", tenant, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("writing the credentials of tenant %s: %w", tenant, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Tenant %s's own credentials, written by foldline deploy: source this file\n# (set -a; . FILE) to run foldline, or any Pulsar or Cassandra client, as the tenant.\n", tenant)
	fmt.Fprintf(&b, "FOLDLINE_PULSAR_TOKEN=%s\n", id.PulsarToken)
	if id.CassandraUser != "" {
		fmt.Fprintf(&b, "FOLDLINE_CASSANDRA_USER=%s\nFOLDLINE_CASSANDRA_PASSWORD=%s\n", id.CassandraUser, id.CassandraPassword)
	}
	if err := plainfile.WriteAtomic(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("writing the credentials of tenant %s: %w", tenant, err)
	}
	return path, nil
}

// credentialsPath is where writeCredentials writes tenant's credentials:
// tenants/TENANT.env beside the signing key.
func (id identity) credentialsPath(tenant string) (string, error) {
	if filepath.Base(tenant) != tenant || tenant == "." || tenant == ".." {
		return "", errors.New("not a file name")
	}
	return filepath.Join(filepath.Dir(id.keyFile), "tenants", tenant+".env"), nil
}

// leftovers lists what of the tenant's identity deploy made and purge is to
// remove: its Cassandra roles, of every generation of its name that still
// has one (a purge that stopped half way may have left an older one), and
// its credentials file, when it exists.
func (id identity) leftovers(ctx context.Context, cql *gocql.Session, tenant string) (roles []string, credentials string, err error) {
	if id.Role == "" {
		return nil, "", nil
	}
	if id.CassandraUser != "" {
		if roles, err = tenantRoles(ctx, cql, tenant); err != nil {
			return nil, "", err
		}
	}
	path, err := id.credentialsPath(tenant)
	if err != nil {
		return nil, "", fmt.Errorf("the credentials of tenant %q: %w", tenant, err)
	}
	if _, err := os.Stat(path); err == nil {
		credentials = path
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("the credentials of tenant %s: %w", tenant, err)
	}
	return roles, credentials, nil
}

// tenantRoles lists the Cassandra roles of tenant's name, of any
// generation (tenantid.IsRoleOf).
func tenantRoles(ctx context.Context, cql *gocql.Session, tenant string) ([]string, error) {
	var roles []string
	iter := cql.Query(`SELECT role FROM system_auth.roles`).WithContext(ctx).Iter()
	for role := ""; iter.Scan(&role); {
		if tenantid.IsRoleOf(role, tenant) {
			roles = append(roles, role)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("listing the roles of tenant %s: %w", tenant, err)
	}
	slices.Sort(roles)
	return roles, nil
}

// forget removes what leftovers lists, once the tenant's keyspace is gone:
// its Cassandra roles (the login the tenant's sinks used) and its
// credentials file. It returns what it removed.
func (id identity) forget(ctx context.Context, cql *gocql.Session, tenant string) ([]string, error) {
	roles, credentials, err := id.leftovers(ctx, cql, tenant)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, role := range roles {
		if err := cql.Query(`DROP ROLE IF EXISTS ` + quoteCQL(role)).WithContext(ctx).Exec(); err != nil {
			return done, fmt.Errorf("dropping role %s: %w", role, err)
		}
		done = append(done, "dropped cassandra role "+role)
	}
	if credentials != "" {
		if err := os.Remove(credentials); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return done, fmt.Errorf("removing the credentials of tenant %s: %w", tenant, err)
		}
		done = append(done, "removed credentials file "+credentials)
	}
	return done, nil
}
