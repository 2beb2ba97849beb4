package services

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Setting is one connection setting. It has the same name in every place
// it can be given, which are, from the strongest: the flag --Flag of the
// foldline command (which sets the environment variable), the environment
// variable Env, the key Key of the context in use in the config file
// (section.key, see ConfigFile), and a default.
type Setting struct {
	Flag, Env, Key, Usage string
	// Secret settings are never printed (foldline config view masks them).
	Secret bool
	// SecretFile settings name a file that holds a secret (a token, a
	// password, a private key): Load warns when others may read it.
	SecretFile bool
	// NoFlag settings have no flag: a value on a command line is visible
	// to every local user in the process list.
	NoFlag bool
	// Bool settings take true or false.
	Bool  bool
	field func(*Services) *string
}

// Settings are the connection settings, in the order foldline config view
// prints them.
var Settings = []Setting{
	{Flag: "pulsar-url", Env: "FOLDLINE_PULSAR_URL", Key: "pulsar.url", Usage: "the broker's URL: pulsar:// or, with TLS, pulsar+ssl:// (default: the local stack's, pulsar://127.0.0.1:6650)",
		field: func(s *Services) *string { return &s.PulsarURL }},
	{Flag: "pulsar-admin-url", Env: "FOLDLINE_PULSAR_ADMIN_URL", Key: "pulsar.admin-url", Usage: "the broker's and functions worker's HTTP URL: http:// or https:// (default: http://127.0.0.1:8080)",
		field: func(s *Services) *string { return &s.PulsarAdminURL }},
	{Flag: "pulsar-token", Env: "FOLDLINE_PULSAR_TOKEN", Key: "pulsar.token", Usage: "Pulsar token (visible to other local users in the process list: prefer --pulsar-token-file)", Secret: true,
		field: func(s *Services) *string { return &s.PulsarToken }},
	{Flag: "pulsar-token-file", Env: "FOLDLINE_PULSAR_TOKEN_FILE", Key: "pulsar.token-file", Usage: "file holding the Pulsar token (default, for the local stack's addresses: its superuser token)", SecretFile: true,
		field: func(s *Services) *string { return &s.PulsarTokenFile }},
	{Flag: "pulsar-secret-key-file", Env: "FOLDLINE_PULSAR_SECRET_KEY_FILE", Key: "pulsar.secret-key-file", Usage: "HS256 key that signs Pulsar tokens, with which deploy makes each tenant's token (default, for the local stack's addresses: its key)", SecretFile: true,
		field: func(s *Services) *string { return &s.PulsarSecretKeyFile }},
	{Flag: "pulsar-tls-trust-certs-file", Env: "FOLDLINE_PULSAR_TLS_TRUST_CERTS_FILE", Key: "pulsar.tls-trust-certs-file", Usage: "PEM file of the CAs that sign the broker's TLS certificate (default: the system's)",
		field: func(s *Services) *string { return &s.PulsarTLSTrustCertsFile }},
	{Flag: "pulsar-tls-allow-insecure", Env: "FOLDLINE_PULSAR_TLS_ALLOW_INSECURE", Key: "pulsar.tls-allow-insecure", Usage: "accept a broker TLS certificate no trusted CA signed (true or false; default false)", Bool: true,
		field: func(s *Services) *string { return &s.pulsarTLSAllowInsecure }},
	{Flag: "pulsar-tls-validate-hostname", Env: "FOLDLINE_PULSAR_TLS_VALIDATE_HOSTNAME", Key: "pulsar.tls-validate-hostname", Usage: "check that the broker's TLS certificate names its host (true or false; default true)", Bool: true,
		field: func(s *Services) *string { return &s.pulsarTLSValidateHostname }},
	{Flag: "pulsar-tls-cert-file", Env: "FOLDLINE_PULSAR_TLS_CERT_FILE", Key: "pulsar.tls-cert-file", Usage: "PEM client certificate to authenticate to Pulsar with (with --pulsar-tls-key-file; instead of a token)",
		field: func(s *Services) *string { return &s.PulsarTLSCertFile }},
	{Flag: "pulsar-tls-key-file", Env: "FOLDLINE_PULSAR_TLS_KEY_FILE", Key: "pulsar.tls-key-file", Usage: "PEM private key of --pulsar-tls-cert-file", SecretFile: true,
		field: func(s *Services) *string { return &s.PulsarTLSKeyFile }},
	{Flag: "pulsar-oauth2-issuer-url", Env: "FOLDLINE_PULSAR_OAUTH2_ISSUER_URL", Key: "pulsar.oauth2-issuer-url", Usage: "OAuth 2.0 issuer to get Pulsar access tokens from (client credentials; instead of a token)",
		field: func(s *Services) *string { return &s.PulsarOAuth2IssuerURL }},
	{Flag: "pulsar-oauth2-audience", Env: "FOLDLINE_PULSAR_OAUTH2_AUDIENCE", Key: "pulsar.oauth2-audience", Usage: "OAuth 2.0 audience of the Pulsar cluster",
		field: func(s *Services) *string { return &s.PulsarOAuth2Audience }},
	{Flag: "pulsar-oauth2-client-id", Env: "FOLDLINE_PULSAR_OAUTH2_CLIENT_ID", Key: "pulsar.oauth2-client-id", Usage: "OAuth 2.0 client id (default: the key file's client_id)",
		field: func(s *Services) *string { return &s.PulsarOAuth2ClientID }},
	{Flag: "pulsar-oauth2-key-file", Env: "FOLDLINE_PULSAR_OAUTH2_KEY_FILE", Key: "pulsar.oauth2-key-file", Usage: "OAuth 2.0 client credentials file (JSON with client_id and client_secret)", SecretFile: true,
		field: func(s *Services) *string { return &s.PulsarOAuth2KeyFile }},
	{Flag: "pulsar-oauth2-scope", Env: "FOLDLINE_PULSAR_OAUTH2_SCOPE", Key: "pulsar.oauth2-scope", Usage: "OAuth 2.0 scope to ask for",
		field: func(s *Services) *string { return &s.PulsarOAuth2Scope }},
	{Flag: "cassandra-hosts", Env: "FOLDLINE_CASSANDRA", Key: "cassandra.hosts", Usage: "Cassandra contact points, host:port separated by commas (default: the local stack's, 127.0.0.1:9042)",
		field: func(s *Services) *string { return &s.CassandraHost }},
	{Flag: "cassandra-sink-hosts", Env: "FOLDLINE_CASSANDRA_SINK_HOSTS", Key: "cassandra.sink-hosts", Usage: "the contact points that deployed sinks use, when the functions workers reach Cassandra by other addresses than this machine (default: --cassandra-hosts)",
		field: func(s *Services) *string { return &s.CassandraSinkHosts }},
	{Flag: "cassandra-user", Env: "FOLDLINE_CASSANDRA_USER", Key: "cassandra.user", Usage: "Cassandra role to log in as (default, for the local stack's address: its superuser)",
		field: func(s *Services) *string { return &s.CassandraUser }},
	{Flag: "cassandra-password", Env: "FOLDLINE_CASSANDRA_PASSWORD", Key: "cassandra.password", Usage: "Cassandra password", Secret: true, NoFlag: true,
		field: func(s *Services) *string { return &s.CassandraPassword }},
	{Flag: "cassandra-password-file", Env: "FOLDLINE_CASSANDRA_PASSWORD_FILE", Key: "cassandra.password-file", Usage: "file holding the Cassandra password (or set FOLDLINE_CASSANDRA_PASSWORD)", SecretFile: true,
		field: func(s *Services) *string { return &s.CassandraPasswordFile }},
	{Flag: "cassandra-tls", Env: "FOLDLINE_CASSANDRA_TLS", Key: "cassandra.tls", Usage: "connect to Cassandra with TLS (true or false; default: true when a --cassandra-tls-* file is given)", Bool: true,
		field: func(s *Services) *string { return &s.cassandraTLS }},
	{Flag: "cassandra-tls-ca-file", Env: "FOLDLINE_CASSANDRA_TLS_CA_FILE", Key: "cassandra.tls-ca-file", Usage: "PEM file of the CAs that sign Cassandra's TLS certificate (default: the system's)",
		field: func(s *Services) *string { return &s.CassandraTLSCAFile }},
	{Flag: "cassandra-tls-cert-file", Env: "FOLDLINE_CASSANDRA_TLS_CERT_FILE", Key: "cassandra.tls-cert-file", Usage: "PEM client certificate for Cassandra (with --cassandra-tls-key-file)",
		field: func(s *Services) *string { return &s.CassandraTLSCertFile }},
	{Flag: "cassandra-tls-key-file", Env: "FOLDLINE_CASSANDRA_TLS_KEY_FILE", Key: "cassandra.tls-key-file", Usage: "PEM private key of --cassandra-tls-cert-file", SecretFile: true,
		field: func(s *Services) *string { return &s.CassandraTLSKeyFile }},
	{Flag: "cassandra-tls-validate-hostname", Env: "FOLDLINE_CASSANDRA_TLS_VALIDATE_HOSTNAME", Key: "cassandra.tls-validate-hostname", Usage: "check that Cassandra's TLS certificate names its host (true or false; default true)", Bool: true,
		field: func(s *Services) *string { return &s.cassandraTLSValidateHostname }},
}

// The settings that choose the config file and the context in it; they
// have flags too (--config, --context), but no key.
var (
	ConfigSetting  = Setting{Flag: "config", Env: "FOLDLINE_CONFIG", Usage: "the config file of named contexts (default: $XDG_CONFIG_HOME/foldline/config.yaml, ~/.config/foldline/config.yaml)"}
	ContextSetting = Setting{Flag: "context", Env: "FOLDLINE_CONTEXT", Usage: "the context of the config file to connect with (default: its current-context)"}
)

// Defaults of the addresses: the local stack's.
const (
	DefaultPulsarURL      = "pulsar://127.0.0.1:6650"
	DefaultPulsarAdminURL = "http://127.0.0.1:8080"
	DefaultCassandraHost  = "127.0.0.1:9042"
)

// Origin says where a setting's value came from, for messages that tell
// the user what to change.
type Origin struct {
	// Setting is the setting.
	Setting *Setting
	// Env is true when the value came from the environment (or the flag).
	Env bool
	// Context and File name the context it came from, when it did.
	Context, File string
	// Line is the line of the context file that holds it.
	Line int
}

// String names the origin: the environment variable (or flag), the
// context's key, or the default.
func (o Origin) String() string {
	switch {
	case o.Env:
		return fmt.Sprintf("--%s (%s)", o.Setting.Flag, o.Setting.Env)
	case o.Context != "":
		return fmt.Sprintf("%s of context %q in %s:%d", o.Setting.Key, o.Context, o.File, o.Line)
	}
	return "the default"
}

// Change tells how to give the setting another value, naming every place.
func (o Origin) Change() string {
	s := o.Setting
	how := fmt.Sprintf("set --%s (%s) or %s in a context", s.Flag, s.Env, s.Key)
	if s.NoFlag {
		how = fmt.Sprintf("set %s or %s in a context", s.Env, s.Key)
	}
	return fmt.Sprintf("it comes from %s: %s", o, how)
}

// ErrConfig is wrapped by errors in the settings or the config file.
var ErrConfig = errors.New("bad connection settings")

// Load resolves every setting from the environment (which the foldline
// command's flags set), the config file's context and the defaults. The
// local stack's credential files are a default only for loopback
// addresses, so that a cluster elsewhere never receives the local
// superuser's token or password.
func Load() (Services, error) { return load(os.Getenv, true) }

// LoadForTests is Load without the config file: tests run against the
// environment's services or the local stack, never against the cluster a
// user's current context names.
func LoadForTests() (Services, error) { return load(os.Getenv, false) }

func load(getenv func(string) string, useFile bool) (Services, error) {
	var s Services
	s.origins = map[string]Origin{}
	var file *ConfigFile
	if useFile {
		var err error
		if file, err = readConfigFile(getenv); err != nil {
			return Services{}, err
		}
	}
	var ctx *Context
	if file != nil {
		name := cmp.Or(getenv(ContextSetting.Env), file.CurrentContext)
		if name != "" {
			if ctx = file.Find(name); ctx == nil {
				return Services{}, fmt.Errorf("%w: context %q is not in %s (foldline config get-contexts lists them)", ErrConfig, name, file.Path)
			}
			s.Context, s.ConfigFile = ctx.Name, file.Path
		}
	} else if name := getenv(ContextSetting.Env); name != "" && useFile {
		return Services{}, fmt.Errorf("%w: %s=%s names a context, but there is no config file (%s)", ErrConfig, ContextSetting.Env, name, configPath(getenv))
	}
	for i := range Settings {
		st := &Settings[i]
		dst := st.field(&s)
		if v := getenv(st.Env); v != "" {
			*dst = v
			s.origins[st.Flag] = Origin{Setting: st, Env: true}
			continue
		}
		if ctx != nil {
			if v, ok := ctx.Values[st.Key]; ok {
				*dst = v.Value
				s.origins[st.Flag] = Origin{Setting: st, Context: ctx.Name, File: file.Path, Line: v.Line}
				continue
			}
		}
		s.origins[st.Flag] = Origin{Setting: st}
	}
	s.PulsarURL = cmp.Or(s.PulsarURL, DefaultPulsarURL)
	s.PulsarAdminURL = cmp.Or(s.PulsarAdminURL, DefaultPulsarAdminURL)
	s.CassandraHost = cmp.Or(s.CassandraHost, DefaultCassandraHost)
	if err := s.parseBools(); err != nil {
		return Services{}, err
	}
	s.stackDefaults()
	s.warnSharedSecretFiles()
	return s, nil
}

// parseBools checks the true-or-false settings.
func (s *Services) parseBools() error {
	for i := range Settings {
		st := &Settings[i]
		if !st.Bool {
			continue
		}
		v := *st.field(s)
		if v == "" {
			continue
		}
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: %s is %q: want true or false", ErrConfig, s.origins[st.Flag], v)
		}
	}
	return nil
}

// boolSetting returns the value of a true-or-false setting, or def when unset.
func boolSetting(v string, def bool) bool {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def // unset: Load checked the rest
	}
	return b
}

// stackDefaults fills in the local stack's credential files, for the local
// stack's own addresses only.
func (s *Services) stackDefaults() {
	creds := StackCredentialsDir()
	if creds == "" {
		return
	}
	if loopbackURL(s.PulsarURL) && loopbackURL(s.PulsarAdminURL) {
		if s.PulsarToken == "" && s.PulsarTokenFile == "" && s.PulsarOAuth2IssuerURL == "" && s.PulsarTLSCertFile == "" {
			s.PulsarTokenFile = existing(filepath.Join(creds, StackPulsarToken))
		}
		if s.PulsarSecretKeyFile == "" {
			s.PulsarSecretKeyFile = existing(filepath.Join(creds, StackPulsarSecretKey))
		}
	}
	if loopbackHosts(s.CassandraHost) && s.CassandraUser == "" && s.CassandraPassword == "" && s.CassandraPasswordFile == "" {
		if s.CassandraPasswordFile = existing(filepath.Join(creds, StackCassandraPassword)); s.CassandraPasswordFile != "" {
			s.CassandraUser = StackCassandraUser
		}
	}
}

// loopbackURL reports whether a URL's host is this machine's loopback.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && loopbackHost(u.Hostname())
}

// loopbackHosts reports whether every host:port of a list is loopback.
func loopbackHosts(list string) bool {
	for _, h := range splitHosts(list) {
		host, _, err := net.SplitHostPort(h)
		if err != nil {
			host = h
		}
		if !loopbackHost(host) {
			return false
		}
	}
	return true
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// splitHosts splits a comma-separated list of contact points.
func splitHosts(list string) []string {
	var hosts []string
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// Origin returns where the setting named by its flag came from.
func (s Services) Origin(flag string) Origin {
	if o, ok := s.origins[flag]; ok {
		return o
	}
	for i := range Settings {
		if Settings[i].Flag == flag {
			return Origin{Setting: &Settings[i]}
		}
	}
	panic("services: no setting " + flag)
}

// Values returns each setting's value and origin, in Settings order, with
// secrets masked; for foldline config view.
func (s Services) Values() []SettingValue {
	out := make([]SettingValue, 0, len(Settings))
	for i := range Settings {
		st := &Settings[i]
		v := *st.field(&s)
		if st.Secret && v != "" {
			v = "(set)"
		}
		origin := s.Origin(st.Flag)
		src := origin.String()
		if v != "" && !origin.Env && origin.Context == "" {
			src = "the default"
		}
		out = append(out, SettingValue{Key: st.Key, Value: v, Source: src})
	}
	return out
}

// SettingValue is a setting as foldline config view shows it.
type SettingValue struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}
