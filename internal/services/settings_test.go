package services

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// env is a fake environment for load.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// stackDir makes a local stack folder with its credential files and points
// FOLDLINE_STACK_DIR at it.
func stackDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.MkdirAll(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{StackPulsarToken, StackPulsarSecretKey, StackCassandraPassword} {
		if err := os.WriteFile(filepath.Join(creds, f), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FOLDLINE_STACK_DIR", dir)
	return creds
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const twoContexts = `# contexts
current-context: local
contexts:
  - name: local
    pulsar:
      url: pulsar://127.0.0.1:6650
  - name: prod
    pulsar:
      url: pulsar+ssl://broker.example.com:6651
      admin-url: https://broker.example.com:8443
      token-file: /etc/foldline/prod.token
      tls-trust-certs-file: /etc/foldline/ca.pem
      tls-allow-insecure: false
    cassandra:
      hosts: [c1.example.com:9042, c2.example.com:9042]
      sink-hosts: cassandra.internal:9042
      user: foldline
      password-file: /etc/foldline/cassandra.password
      tls-ca-file: /etc/foldline/ca.pem
`

func TestLoadPrecedence(t *testing.T) {
	creds := stackDir(t)
	path := writeConfig(t, twoContexts)
	tests := []struct {
		name  string
		env   env
		check func(t *testing.T, s Services)
	}{
		{name: "nothing set: the local stack and its credentials", env: env{"XDG_CONFIG_HOME": t.TempDir()},
			check: func(t *testing.T, s Services) {
				if s.PulsarURL != DefaultPulsarURL || s.CassandraHost != DefaultCassandraHost || s.PulsarTokenFile != filepath.Join(creds, StackPulsarToken) || s.CassandraUser != StackCassandraUser {
					t.Errorf("got %+v", s)
				}
			}},
		{name: "the current context", env: env{"FOLDLINE_CONFIG": path},
			check: func(t *testing.T, s Services) {
				if s.Context != "local" || s.PulsarURL != "pulsar://127.0.0.1:6650" || s.PulsarTokenFile != filepath.Join(creds, StackPulsarToken) {
					t.Errorf("got %+v", s)
				}
				if o := s.Origin("pulsar-url"); o.Context != "local" || o.Line != 6 {
					t.Errorf("origin of pulsar-url %+v, want line 6 of context local", o)
				}
			}},
		{name: "a remote context never gets the local stack's credentials", env: env{"FOLDLINE_CONFIG": path, "FOLDLINE_CONTEXT": "prod"},
			check: func(t *testing.T, s Services) {
				if s.PulsarTokenFile != "/etc/foldline/prod.token" || s.PulsarSecretKeyFile != "" || s.CassandraPasswordFile != "/etc/foldline/cassandra.password" || s.CassandraUser != "foldline" {
					t.Errorf("credentials %+v", s)
				}
				if s.CassandraHost != "c1.example.com:9042,c2.example.com:9042" || s.SinkHosts() != "cassandra.internal:9042" {
					t.Errorf("hosts %q, sink hosts %q", s.CassandraHost, s.SinkHosts())
				}
				if !s.CassandraTLS() || s.PulsarTLSAllowInsecure() || !s.PulsarTLSValidateHostname() {
					t.Errorf("TLS: cassandra %v, insecure %v, validate %v", s.CassandraTLS(), s.PulsarTLSAllowInsecure(), s.PulsarTLSValidateHostname())
				}
			}},
		{name: "a remote address from the environment gets no local credentials", env: env{"XDG_CONFIG_HOME": t.TempDir(), "FOLDLINE_PULSAR_URL": "pulsar://10.1.2.3:6650", "FOLDLINE_CASSANDRA": "10.1.2.4:9042"},
			check: func(t *testing.T, s Services) {
				if s.PulsarTokenFile != "" || s.PulsarSecretKeyFile != "" || s.CassandraUser != "" || s.CassandraPasswordFile != "" {
					t.Errorf("local credentials sent to a remote cluster: %+v", s)
				}
			}},
		{name: "the environment wins over the context", env: env{"FOLDLINE_CONFIG": path, "FOLDLINE_CONTEXT": "prod", "FOLDLINE_PULSAR_URL": "pulsar://other:6650"},
			check: func(t *testing.T, s Services) {
				if s.PulsarURL != "pulsar://other:6650" || !s.Origin("pulsar-url").Env || s.PulsarAdminURL != "https://broker.example.com:8443" {
					t.Errorf("got %+v", s)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := load(tt.env.get, true)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

func TestLoadRefusesBadSettings(t *testing.T) {
	stackDir(t)
	tests := []struct {
		name, file string
		env        env
		want       string
	}{
		{name: "unknown key", file: "contexts:\n  - name: a\n    pulsar:\n      urll: x\n", want: ":4: contexts[0].pulsar.urll: unknown setting"},
		{name: "unknown section", file: "contexts:\n  - name: a\n    kafka: {}\n", want: ":3: contexts[0].kafka: unknown key"},
		{name: "no name", file: "contexts:\n  - pulsar: {url: x}\n", want: ":2: contexts[0]: a context needs a name"},
		{name: "twice", file: "contexts:\n  - name: a\n  - name: a\n", want: `:3: contexts[1].name: context "a" is defined twice`},
		{name: "unknown current context", file: "current-context: b\ncontexts:\n  - name: a\n", want: `current-context "b" is not one of the contexts`},
		{name: "bad bool", file: "current-context: a\ncontexts:\n  - name: a\n    pulsar:\n      tls-allow-insecure: maybe\n", want: `pulsar.tls-allow-insecure of context "a"`},
		{name: "unknown context named", file: "contexts:\n  - name: a\n", env: env{"FOLDLINE_CONTEXT": "b"}, want: `context "b" is not in`},
		{name: "bad bool in the environment", file: "", env: env{"FOLDLINE_CASSANDRA_TLS": "yes please"}, want: "--cassandra-tls (FOLDLINE_CASSANDRA_TLS) is \"yes please\""},
		{name: "not YAML", file: "contexts: [\n", want: "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{"FOLDLINE_CONFIG": writeConfig(t, tt.file)}
			for k, v := range tt.env {
				e[k] = v
			}
			_, err := load(e.get, true)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrConfig saying %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesANamedConfigFileThatIsMissing(t *testing.T) {
	_, err := load(env{"FOLDLINE_CONFIG": filepath.Join(t.TempDir(), "missing.yaml")}.get, true)
	if !errors.Is(err, ErrConfig) {
		t.Errorf("error %v, want ErrConfig", err)
	}
	// The default file may be missing.
	if _, err := load(env{"XDG_CONFIG_HOME": t.TempDir()}.get, true); err != nil {
		t.Errorf("no default config file: %v", err)
	}
}

func TestUseContextKeepsTheRestOfTheFile(t *testing.T) {
	path := writeConfig(t, twoContexts)
	if err := UseContext(path, "prod"); err != nil {
		t.Fatal(err)
	}
	f, err := ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.CurrentContext != "prod" || len(f.Contexts) != 2 || f.Find("prod").Values["cassandra.hosts"].Value != "c1.example.com:9042,c2.example.com:9042" {
		t.Errorf("after use-context: %+v", f)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "# contexts") {
		t.Errorf("the comment is gone:\n%s", data)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	if err := UseContext(path, "staging"); !errors.Is(err, ErrConfig) {
		t.Errorf("use-context of an unknown context: %v", err)
	}
}

// An unreachable service's error names where its address came from and
// how to change it; for the local stack also the script that starts it.
func TestCheckNamesTheSettingToChange(t *testing.T) {
	stackDir(t)
	path := writeConfig(t, "current-context: x\ncontexts:\n  - name: x\n    cassandra:\n      hosts: 192.0.2.1:1\n")
	s, err := load(env{"FOLDLINE_CONFIG": path}.get, true)
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckCassandra()
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), `cassandra.hosts of context "x" in `+path+":5") || !strings.Contains(err.Error(), "--cassandra-hosts (FOLDLINE_CASSANDRA)") {
		t.Errorf("error %v", err)
	}
	s, err = load(env{"XDG_CONFIG_HOME": t.TempDir(), "FOLDLINE_PULSAR_URL": "pulsar://127.0.0.1:1"}.get, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckPulsar(); !strings.Contains(err.Error(), StartHint) || !strings.Contains(err.Error(), "--pulsar-url (FOLDLINE_PULSAR_URL)") {
		t.Errorf("error %v", err)
	}
}

func TestValuesMaskSecrets(t *testing.T) {
	stackDir(t)
	s, err := load(env{"XDG_CONFIG_HOME": t.TempDir(), "FOLDLINE_PULSAR_TOKEN": "sekrit", "FOLDLINE_CASSANDRA_PASSWORD": "hunter2"}.get, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Values() {
		if strings.Contains(v.Value, "sekrit") || strings.Contains(v.Value, "hunter2") {
			t.Errorf("%s shows its secret: %q", v.Key, v.Value)
		}
	}
}

// OAuth 2.0 and client certificates reach both Pulsar clients: the admin
// client's fields and the binary client's authentication.
func TestPulsarAuthenticationSettings(t *testing.T) {
	stackDir(t)
	s, err := load(env{"XDG_CONFIG_HOME": t.TempDir(), "FOLDLINE_PULSAR_URL": "pulsar+ssl://broker.example.com:6651",
		"FOLDLINE_PULSAR_OAUTH2_ISSUER_URL": "https://auth.example.com/", "FOLDLINE_PULSAR_OAUTH2_AUDIENCE": "urn:pulsar",
		"FOLDLINE_PULSAR_OAUTH2_KEY_FILE": "/etc/foldline/oauth.json", "FOLDLINE_PULSAR_OAUTH2_SCOPE": "admin"}.get, true)
	if err != nil {
		t.Fatal(err)
	}
	c := s.PulsarAdminConfig()
	if c.IssuerEndpoint != "https://auth.example.com/" || c.Audience != "urn:pulsar" || c.KeyFile != "/etc/foldline/oauth.json" || c.Scope != "admin" || c.Token != "" || c.TokenFile != "" {
		t.Errorf("admin config %+v, want OAuth 2.0 and no token", c)
	}
	if s.PulsarAuth() == nil {
		t.Error("no authentication for the Pulsar client")
	}
	s, err = load(env{"XDG_CONFIG_HOME": t.TempDir(), "FOLDLINE_PULSAR_URL": "pulsar+ssl://broker.example.com:6651",
		"FOLDLINE_PULSAR_TLS_CERT_FILE": "/etc/c.pem", "FOLDLINE_PULSAR_TLS_KEY_FILE": "/etc/k.pem", "FOLDLINE_PULSAR_TLS_ALLOW_INSECURE": "true"}.get, true)
	if err != nil {
		t.Fatal(err)
	}
	c = s.PulsarAdminConfig()
	opts := s.PulsarClientOptions()
	if c.TLSCertFile != "/etc/c.pem" || c.TLSKeyFile != "/etc/k.pem" || !c.TLSAllowInsecureConnection || !opts.TLSAllowInsecureConnection || opts.Authentication == nil {
		t.Errorf("admin config %+v, client options %+v: want the client certificate and insecure TLS", c, opts)
	}
}
