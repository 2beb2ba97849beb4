// Package services locates the Pulsar and Cassandra that Foldline talks to
// and the credentials and TLS settings it talks to them with: from flags,
// environment variables and a config file of named contexts (like kubectl's),
// with the local stack's addresses and credential files as defaults. It is
// the one place that builds Pulsar clients, Pulsar admin clients and
// Cassandra cluster configs from them, and it turns "connection refused"
// into an error that names the setting to change, or the script that starts
// the local stack.
package services

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
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
// to use them with, as Load resolves them (see Settings for each one's
// flag, environment variable and context key). Empty credentials mean none
// (an open stack).
type Services struct {
	// Context names the context of ConfigFile the settings came from ("":
	// none, flags, environment and defaults only).
	Context, ConfigFile string

	// PulsarURL is the broker's binary protocol URL.
	PulsarURL string
	// PulsarAdminURL is the broker's and functions worker's HTTP URL.
	PulsarAdminURL string
	// CassandraHost holds the CQL contact points, host:port separated by
	// commas.
	CassandraHost string
	// CassandraSinkHosts are the contact points deployed sinks get ("":
	// CassandraHost).
	CassandraSinkHosts string

	// PulsarToken is the token to authenticate to Pulsar with. It wins
	// over PulsarTokenFile.
	PulsarToken string
	// PulsarTokenFile holds the token, read at each connection.
	PulsarTokenFile string
	// PulsarSecretKeyFile is the HS256 key that signs tenants' tokens, which
	// foldline deploy needs.
	PulsarSecretKeyFile string
	// PulsarTLSTrustCertsFile is the PEM file of the CAs that sign the
	// broker's certificate ("": the system's).
	PulsarTLSTrustCertsFile string
	// PulsarTLSCertFile and PulsarTLSKeyFile are a client certificate to
	// authenticate with instead of a token.
	PulsarTLSCertFile, PulsarTLSKeyFile string
	// PulsarOAuth2* get access tokens from an OAuth 2.0 issuer (client
	// credentials flow) instead of a fixed token.
	PulsarOAuth2IssuerURL, PulsarOAuth2Audience, PulsarOAuth2ClientID, PulsarOAuth2KeyFile, PulsarOAuth2Scope string
	// CassandraUser is the Cassandra role to log in as; "" logs in as
	// nobody.
	CassandraUser string
	// CassandraPassword is its password. It wins over
	// CassandraPasswordFile.
	CassandraPassword string
	// CassandraPasswordFile holds the password.
	CassandraPasswordFile string
	// CassandraTLSCAFile is the PEM file of the CAs that sign Cassandra's
	// certificate; with it, or with CassandraTLSCertFile, or with
	// cassandra.tls true, the connection uses TLS.
	CassandraTLSCAFile string
	// CassandraTLSCertFile and CassandraTLSKeyFile are a client certificate.
	CassandraTLSCertFile, CassandraTLSKeyFile string

	// The true-or-false settings as given ("" unset); see the methods.
	pulsarTLSAllowInsecure, pulsarTLSValidateHostname, cassandraTLS, cassandraTLSValidateHostname string

	// origins says where each setting (by flag) came from.
	origins map[string]Origin
}

// PulsarTLSAllowInsecure reports whether a broker certificate no trusted CA
// signed is accepted (default false).
func (s Services) PulsarTLSAllowInsecure() bool { return boolSetting(s.pulsarTLSAllowInsecure, false) }

// PulsarTLSValidateHostname reports whether the broker's certificate must
// name its host (default true).
func (s Services) PulsarTLSValidateHostname() bool {
	return boolSetting(s.pulsarTLSValidateHostname, true)
}

// CassandraTLS reports whether Cassandra is reached over TLS.
func (s Services) CassandraTLS() bool {
	return boolSetting(s.cassandraTLS, s.CassandraTLSCAFile != "" || s.CassandraTLSCertFile != "")
}

// SinkHosts are the Cassandra contact points that deployed sinks get.
func (s Services) SinkHosts() string { return cmp.Or(s.CassandraSinkHosts, s.CassandraHost) }

// Describe names the cluster these services point at, for the header of
// plan and deploy.
func (s Services) Describe() string {
	var b strings.Builder
	if s.Context != "" {
		fmt.Fprintf(&b, "context %s (%s): ", s.Context, s.ConfigFile)
	}
	fmt.Fprintf(&b, "Pulsar %s, admin %s; Cassandra %s", s.PulsarURL, s.PulsarAdminURL, s.CassandraHost)
	if s.CassandraSinkHosts != "" && s.CassandraSinkHosts != s.CassandraHost {
		fmt.Fprintf(&b, " (sinks: %s)", s.CassandraSinkHosts)
	}
	return b.String()
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

// PulsarAuth returns the authentication of Pulsar clients: a token, a
// client certificate or OAuth 2.0, or nil for none.
func (s Services) PulsarAuth() pulsar.Authentication {
	switch {
	case s.PulsarToken != "":
		return pulsar.NewAuthenticationToken(s.PulsarToken)
	case s.PulsarTokenFile != "":
		return pulsar.NewAuthenticationTokenFromFile(s.PulsarTokenFile)
	case s.PulsarOAuth2IssuerURL != "":
		params := map[string]string{
			"type":       "client_credentials",
			"issuerUrl":  s.PulsarOAuth2IssuerURL,
			"audience":   s.PulsarOAuth2Audience,
			"privateKey": s.PulsarOAuth2KeyFile,
			"clientId":   s.PulsarOAuth2ClientID,
			"scope":      s.PulsarOAuth2Scope,
		}
		return pulsar.NewAuthenticationOAuth2(params)
	case s.PulsarTLSCertFile != "":
		return pulsar.NewAuthenticationTLS(s.PulsarTLSCertFile, s.PulsarTLSKeyFile)
	}
	return nil
}

// PulsarAuthMethod names, for messages, how Pulsar clients authenticate
// (PulsarAuth): "a token", "OAuth 2.0", "a TLS client certificate", or ""
// for none.
func (s Services) PulsarAuthMethod() string {
	switch {
	case s.PulsarToken != "" || s.PulsarTokenFile != "":
		return "a token"
	case s.PulsarOAuth2IssuerURL != "":
		return "OAuth 2.0"
	case s.PulsarTLSCertFile != "":
		return "a TLS client certificate"
	}
	return ""
}

// PulsarClientOptions are the options of a Pulsar client of these
// services: URL, TLS and authentication; callers add their own (a logger).
func (s Services) PulsarClientOptions() pulsar.ClientOptions {
	return pulsar.ClientOptions{
		URL:                        s.PulsarURL,
		Authentication:             s.PulsarAuth(),
		TLSTrustCertsFilePath:      s.PulsarTLSTrustCertsFile,
		TLSAllowInsecureConnection: s.PulsarTLSAllowInsecure(),
		TLSValidateHostname:        s.PulsarTLSValidateHostname(),
	}
}

// PulsarAdminConfig is the config of a pulsaradmin client of these
// services (the default API version; set PulsarAPIVersion for another).
func (s Services) PulsarAdminConfig() *config.Config {
	c := &config.Config{
		WebServiceURL:                 s.PulsarAdminURL,
		Token:                         s.PulsarToken,
		TokenFile:                     s.PulsarTokenFile,
		TLSTrustCertsFilePath:         s.PulsarTLSTrustCertsFile,
		TLSAllowInsecureConnection:    s.PulsarTLSAllowInsecure(),
		TLSEnableHostnameVerification: s.PulsarTLSValidateHostname(),
	}
	switch {
	case s.PulsarToken != "" || s.PulsarTokenFile != "":
	case s.PulsarOAuth2IssuerURL != "":
		c.IssuerEndpoint, c.Audience, c.ClientID, c.KeyFile, c.Scope = s.PulsarOAuth2IssuerURL, s.PulsarOAuth2Audience, s.PulsarOAuth2ClientID, s.PulsarOAuth2KeyFile, s.PulsarOAuth2Scope
	case s.PulsarTLSCertFile != "":
		c.TLSCertFile, c.TLSKeyFile = s.PulsarTLSCertFile, s.PulsarTLSKeyFile
	}
	return c
}

// PulsarHTTPClient is an HTTP client for the few admin requests pulsaradmin
// lacks, with the admin API's TLS settings (see AuthorizePulsar for the
// token).
func (s Services) PulsarHTTPClient(timeout time.Duration) (*http.Client, error) {
	if !strings.HasPrefix(s.PulsarAdminURL, "https://") {
		return &http.Client{Timeout: timeout}, nil
	}
	tc, err := TLSConfig(s.PulsarTLSTrustCertsFile, s.PulsarTLSCertFile, s.PulsarTLSKeyFile, s.PulsarTLSAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("setting up TLS to the Pulsar admin API: %w", err)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// tlsConfig builds a client TLS config from PEM files ("" for none).
func TLSConfig(caFile, certFile, keyFile string, insecure bool) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // only when asked
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("reading the CA file %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("reading the client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
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

// CassandraCluster returns a cluster config for the Cassandra contact
// points with the credentials and TLS set; callers tune timeouts and
// consistency.
func (s Services) CassandraCluster() (*gocql.ClusterConfig, error) {
	user, password, err := s.CassandraCredentials()
	if err != nil {
		return nil, err
	}
	cluster := gocql.NewCluster(splitHosts(s.CassandraHost)...)
	if user != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: password}
	}
	if s.CassandraTLS() {
		validate := boolSetting(s.cassandraTLSValidateHostname, true)
		// Go checks the chain and the host name together: not checking the
		// name means not checking the certificate.
		tc, err := TLSConfig(s.CassandraTLSCAFile, s.CassandraTLSCertFile, s.CassandraTLSKeyFile, !validate)
		if err != nil {
			return nil, fmt.Errorf("setting up TLS to Cassandra: %w", err)
		}
		cluster.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: validate}
	}
	return cluster, nil
}

// CheckPulsar returns an ErrUnreachable error naming the setting to
// change (and, for the local stack, the script that starts it) when the
// broker or its admin API does not accept connections.
func (s Services) CheckPulsar() error {
	if err := s.check("Pulsar", []string{HostPort(s.PulsarURL)}, "pulsar-url"); err != nil {
		return err
	}
	return s.check("the Pulsar admin API", []string{HostPort(s.PulsarAdminURL)}, "pulsar-admin-url")
}

// CheckCassandra returns an ErrUnreachable error naming the setting to
// change when no Cassandra contact point accepts connections.
func (s Services) CheckCassandra() error {
	return s.check("Cassandra", splitHosts(s.CassandraHost), "cassandra-hosts")
}

// check dials each address once; when none answers, the error names the
// setting the addresses came from.
func (s Services) check(name string, addrs []string, flag string) error {
	var errs []error
	for _, addr := range addrs {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			return conn.Close()
		}
		errs = append(errs, err)
	}
	hint := s.Origin(flag).Change()
	if loopbackHosts(strings.Join(addrs, ",")) {
		hint = "start the local stack with " + StartHint + ", or point at your cluster: " + hint
	}
	return fmt.Errorf("%w: %s is not reachable at %s (%v); %s", ErrUnreachable, name, strings.Join(addrs, ","), errors.Join(errs...), hint)
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
