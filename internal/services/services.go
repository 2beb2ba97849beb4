// Package services locates the Pulsar and Cassandra that Foldline talks to
// and the credentials it talks to them with, from environment variables with
// the local stack's addresses and credential files as defaults; it is the one
// place that builds Pulsar clients, Pulsar admin clients and Cassandra
// cluster configs from them, and it turns "connection refused" into an error
// that names the script that starts the stack.
package services

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/gocql/gocql"
)

// StartHint is the command that starts the local stack.
const StartHint = "scripts/stack up"

// ErrUnreachable is returned by Check when a service does not answer.
var ErrUnreachable = errors.New("service unreachable")

// The local stack's credential files, in its credentials folder (written by
// scripts/stack up unless the stack runs open; see scripts/lib.sh).
const (
	// StackPulsarToken is the Pulsar superuser's token.
	StackPulsarToken = "pulsar-admin.token"
	// StackPulsarSecretKey is the HS256 key that signs every Pulsar token.
	StackPulsarSecretKey = "pulsar-secret.key"
	// StackCassandraPassword is the Cassandra superuser's password.
	StackCassandraPassword = "cassandra.password"
	// StackCassandraUser is the Cassandra superuser's name.
	StackCassandraUser = "cassandra"
)

// Services holds the addresses of Pulsar and Cassandra and the credentials
// to use them with. Empty credentials mean none (an open stack).
type Services struct {
	// PulsarURL is the broker's binary protocol URL (FOLDLINE_PULSAR_URL,
	// default pulsar://127.0.0.1:6650).
	PulsarURL string
	// PulsarAdminURL is the broker's and functions worker's HTTP URL
	// (FOLDLINE_PULSAR_ADMIN_URL, default http://127.0.0.1:8080).
	PulsarAdminURL string
	// CassandraHost is host:port of the CQL native transport
	// (FOLDLINE_CASSANDRA, default 127.0.0.1:9042).
	CassandraHost string

	// PulsarToken is the token to authenticate to Pulsar with
	// (FOLDLINE_PULSAR_TOKEN). It wins over PulsarTokenFile.
	PulsarToken string
	// PulsarTokenFile holds the token, read at each connection
	// (FOLDLINE_PULSAR_TOKEN_FILE, default the local stack's superuser
	// token when that file exists).
	PulsarTokenFile string
	// PulsarSecretKeyFile is the HS256 key that signs tenants' tokens, which
	// foldline deploy needs (FOLDLINE_PULSAR_SECRET_KEY_FILE, default the
	// local stack's when that file exists).
	PulsarSecretKeyFile string
	// CassandraUser is the Cassandra role to log in as
	// (FOLDLINE_CASSANDRA_USER, default the local stack's superuser when its
	// password file exists); "" logs in as nobody.
	CassandraUser string
	// CassandraPassword is its password (FOLDLINE_CASSANDRA_PASSWORD). It
	// wins over CassandraPasswordFile.
	CassandraPassword string
	// CassandraPasswordFile holds the password (FOLDLINE_CASSANDRA_PASSWORD_FILE,
	// default the local stack's superuser's when that file exists).
	CassandraPasswordFile string
}

// FromEnv reads the service addresses and credentials from the environment,
// with the local stack's as defaults.
func FromEnv() Services {
	s := Services{
		PulsarURL:             getenv("FOLDLINE_PULSAR_URL", "pulsar://127.0.0.1:6650"),
		PulsarAdminURL:        getenv("FOLDLINE_PULSAR_ADMIN_URL", "http://127.0.0.1:8080"),
		CassandraHost:         getenv("FOLDLINE_CASSANDRA", "127.0.0.1:9042"),
		PulsarToken:           os.Getenv("FOLDLINE_PULSAR_TOKEN"),
		PulsarTokenFile:       os.Getenv("FOLDLINE_PULSAR_TOKEN_FILE"),
		PulsarSecretKeyFile:   os.Getenv("FOLDLINE_PULSAR_SECRET_KEY_FILE"),
		CassandraUser:         os.Getenv("FOLDLINE_CASSANDRA_USER"),
		CassandraPassword:     os.Getenv("FOLDLINE_CASSANDRA_PASSWORD"),
		CassandraPasswordFile: os.Getenv("FOLDLINE_CASSANDRA_PASSWORD_FILE"),
	}
	creds := StackCredentialsDir()
	if s.PulsarToken == "" && s.PulsarTokenFile == "" {
		s.PulsarTokenFile = existing(filepath.Join(creds, StackPulsarToken))
	}
	if s.PulsarSecretKeyFile == "" {
		s.PulsarSecretKeyFile = existing(filepath.Join(creds, StackPulsarSecretKey))
	}
	if s.CassandraUser == "" && s.CassandraPassword == "" && s.CassandraPasswordFile == "" {
		if s.CassandraPasswordFile = existing(filepath.Join(creds, StackCassandraPassword)); s.CassandraPasswordFile != "" {
			s.CassandraUser = StackCassandraUser
		}
	}
	return s
}

// StackDir is the local stack's folder: FOLDLINE_STACK_DIR, else .stack in
// the checkout that holds the working directory (the nearest folder above
// it with scripts/stack), else "".
func StackDir() string {
	if d := os.Getenv("FOLDLINE_STACK_DIR"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "stack")); err == nil {
			return filepath.Join(dir, ".stack")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// StackCredentialsDir is the local stack's credentials folder ("" when
// there is no stack folder).
func StackCredentialsDir() string {
	d := StackDir()
	if d == "" {
		return ""
	}
	return filepath.Join(d, "credentials")
}

func existing(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// PulsarAuth returns the authentication of Pulsar clients: a token, or nil
// for none.
func (s Services) PulsarAuth() pulsar.Authentication {
	switch {
	case s.PulsarToken != "":
		return pulsar.NewAuthenticationToken(s.PulsarToken)
	case s.PulsarTokenFile != "":
		return pulsar.NewAuthenticationTokenFromFile(s.PulsarTokenFile)
	}
	return nil
}

// PulsarClientOptions are the options of a Pulsar client of these
// services: URL and authentication; callers add their own (a logger).
func (s Services) PulsarClientOptions() pulsar.ClientOptions {
	return pulsar.ClientOptions{URL: s.PulsarURL, Authentication: s.PulsarAuth()}
}

// PulsarAdminConfig is the config of a pulsaradmin client of these
// services (the default API version; set PulsarAPIVersion for another).
func (s Services) PulsarAdminConfig() *config.Config {
	return &config.Config{WebServiceURL: s.PulsarAdminURL, Token: s.PulsarToken, TokenFile: s.PulsarTokenFile}
}

// PulsarTokenValue returns the Pulsar token, read from its file when
// given as one; "" means none.
func (s Services) PulsarTokenValue() (string, error) {
	if s.PulsarToken != "" || s.PulsarTokenFile == "" {
		return s.PulsarToken, nil
	}
	raw, err := os.ReadFile(s.PulsarTokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the Pulsar token: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// AuthorizePulsar adds the token to a request to the admin API (nothing
// without one), for the few requests pulsaradmin lacks.
func (s Services) AuthorizePulsar(req *http.Request) error {
	token, err := s.PulsarTokenValue()
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return nil
}

// CassandraCredentials returns the user and password to log in to Cassandra
// with; user "" means no login.
func (s Services) CassandraCredentials() (user, password string, err error) {
	password = s.CassandraPassword
	if password == "" && s.CassandraPasswordFile != "" {
		raw, err := os.ReadFile(s.CassandraPasswordFile)
		if err != nil {
			return "", "", fmt.Errorf("reading the Cassandra password: %w", err)
		}
		password = strings.TrimSpace(string(raw))
	}
	return s.CassandraUser, password, nil
}

// CassandraCluster returns a cluster config for the Cassandra host with the
// credentials set; callers tune timeouts and consistency.
func (s Services) CassandraCluster() (*gocql.ClusterConfig, error) {
	user, password, err := s.CassandraCredentials()
	if err != nil {
		return nil, err
	}
	cluster := gocql.NewCluster(s.CassandraHost)
	if user != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: password}
	}
	return cluster, nil
}

// CheckPulsar returns an ErrUnreachable error naming the start script when
// the broker or its admin API does not accept connections.
func (s Services) CheckPulsar() error {
	if err := Check("Pulsar", HostPort(s.PulsarURL)); err != nil {
		return err
	}
	return Check("Pulsar admin API", HostPort(s.PulsarAdminURL))
}

// CheckCassandra returns an ErrUnreachable error naming the start script when
// Cassandra does not accept connections.
func (s Services) CheckCassandra() error {
	return Check("Cassandra", s.CassandraHost)
}

// Check dials addr once and wraps a failure in ErrUnreachable with the start hint.
func Check(name, addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("%w: %s is not reachable at %s (%v); start it with %s", ErrUnreachable, name, addr, err, StartHint)
	}
	return conn.Close()
}

// HostPort turns scheme://host:port[/path] into host:port.
func HostPort(url string) string {
	if i := strings.Index(url, "://"); i >= 0 {
		url = url[i+3:]
	}
	if i := strings.IndexByte(url, '/'); i >= 0 {
		url = url[:i]
	}
	return url
}

// Setting is one credential setting of the command line: the flag --Flag
// sets the environment variable Env, which FromEnv reads, so that a flag
// wins over the environment and reaches every command the same way.
type Setting struct {
	Flag, Env, Usage string
}

// Settings are the credential flags of the foldline command.
var Settings = []Setting{
	{"pulsar-token", "FOLDLINE_PULSAR_TOKEN", "Pulsar token (visible to other local users in the process list: prefer --pulsar-token-file)"},
	{"pulsar-token-file", "FOLDLINE_PULSAR_TOKEN_FILE", "file holding the Pulsar token (default: the local stack's superuser token)"},
	{"pulsar-secret-key-file", "FOLDLINE_PULSAR_SECRET_KEY_FILE", "HS256 key that signs Pulsar tokens, with which deploy makes each tenant's token (default: the local stack's)"},
	{"cassandra-user", "FOLDLINE_CASSANDRA_USER", "Cassandra role to log in as (default: the local stack's superuser)"},
	{"cassandra-password-file", "FOLDLINE_CASSANDRA_PASSWORD_FILE", "file holding the Cassandra password (or set FOLDLINE_CASSANDRA_PASSWORD)"},
}
