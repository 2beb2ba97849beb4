package deploy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foldline/foldline/internal/services"
)

// A tenant's credentials file is its owner's only, also when deploy
// rewrites one an older version (or a hand) left readable by others.
func TestWriteCredentialsMakesAnExistingFilePrivate(t *testing.T) {
	dir := t.TempDir()
	id := identity{Role: "tenant-shop", PulsarToken: "tok", CassandraUser: "tenant-shop", CassandraPassword: "pw", keyFile: filepath.Join(dir, "pulsar-secret.key")}
	old := filepath.Join(dir, "tenants", "shop.env")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("FOLDLINE_PULSAR_TOKEN=old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := id.writeCredentials("shop")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if path != old || info.Mode().Perm() != 0o600 || !strings.Contains(string(data), "FOLDLINE_PULSAR_TOKEN=tok\n") {
		t.Errorf("credentials %s: mode %v, content %q; want %s, -rw-------, the new token", path, info.Mode().Perm(), data, old)
	}
}

// Without a signing key a tenant has no identity of its own; that is
// allowed on an open stack only, never by handing it the deployer's.
func TestWithoutSigningKey(t *testing.T) {
	tests := []struct {
		name          string
		pulsarAuth    string
		cassandraUser string
		want          error
	}{
		{name: "an open stack", want: nil},
		{name: "a Pulsar token", pulsarAuth: "a token", want: ErrNoSigningKey},
		{name: "OAuth 2.0", pulsarAuth: "OAuth 2.0", cassandraUser: "deployer", want: ErrNoSigningKey},
		{name: "a TLS client certificate", pulsarAuth: "a TLS client certificate", want: ErrNoSigningKey},
		{name: "an open Pulsar, Cassandra with a login", cassandraUser: "deployer", want: ErrNoTenantRole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := withoutSigningKey(tt.pulsarAuth, tt.cassandraUser); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("withoutSigningKey(%q, %q) = %v, want %v", tt.pulsarAuth, tt.cassandraUser, err, tt.want)
			}
		})
	}
}

// tenantIdentity never gives a tenant the deployer's Cassandra login, and
// so kubernetes-secret never prints it under the tenant's label.
func TestTenantIdentityNeverTheDeployersLogin(t *testing.T) {
	const password = "the-deployers-own-password"
	deployer := services.Services{CassandraUser: "cassandra", CassandraPassword: password}
	tests := []struct {
		name string
		svc  func(s *services.Services)
		want error
	}{
		{name: "OAuth 2.0", svc: func(s *services.Services) { s.PulsarOAuth2IssuerURL = "https://auth.example.com" }, want: ErrNoSigningKey},
		{name: "a TLS client certificate", svc: func(s *services.Services) { s.PulsarTLSCertFile = "/etc/foldline/client.pem" }, want: ErrNoSigningKey},
		{name: "no Pulsar credentials", svc: func(*services.Services) {}, want: ErrNoTenantRole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := deployer
			tt.svc(&svc)
			id, err := tenantIdentity(t.Context(), svc, nil, "shop")
			if !errors.Is(err, tt.want) {
				t.Errorf("tenantIdentity = %v, want %v", err, tt.want)
			}
			if id.CassandraUser != "" || id.CassandraPassword != "" {
				t.Errorf("the tenant's identity %+v holds the deployer's login", id)
			}
			var out bytes.Buffer
			if WriteKubernetesSecret(&out, "foldline-shop", "", "shop", id.secretValues(true)) == nil || strings.Contains(out.String(), base64.StdEncoding.EncodeToString([]byte(password))) {
				t.Errorf("kubernetes-secret printed the deployer's login for tenant shop:\n%s", out.String())
			}
		})
	}
}
