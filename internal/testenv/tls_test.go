package testenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"

	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// The stack's TLS listeners (scripts/stack: PULSAR_TLS_PORT,
// PULSAR_HTTPS_PORT; Cassandra's native port takes TLS too).
func tlsServices(t *testing.T) (svc services.Services, ca string) {
	t.Helper()
	svc = testenv.All(t)
	ca = filepath.Join(services.StackCredentialsDir(), "tls", "ca.pem")
	if _, err := os.Stat(ca); err != nil {
		t.Fatalf("the stack's CA: %v (scripts/stack up makes it)", err)
	}
	svc.PulsarURL = cmpEnv("FOLDLINE_PULSAR_TLS_URL", "pulsar+ssl://127.0.0.1:6651")
	svc.PulsarAdminURL = cmpEnv("FOLDLINE_PULSAR_ADMIN_TLS_URL", "https://127.0.0.1:8443")
	return svc, ca
}

func cmpEnv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Foldline's clients connect over TLS with the settings of package
// services — trusting the CA given, checking the host name — and refuse a
// server whose certificate no trusted CA signed.
func TestTLSConnections(t *testing.T) {
	svc, ca := tlsServices(t)
	svc.PulsarTLSTrustCertsFile, svc.CassandraTLSCAFile = ca, ca

	t.Run("pulsar", func(t *testing.T) {
		opts := svc.PulsarClientOptions()
		opts.OperationTimeout, opts.ConnectionTimeout = 20*time.Second, 10*time.Second
		client, err := pulsar.NewClient(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		topic := "persistent://public/default/" + uniqueName("tls-")
		producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatalf("producing over TLS to %s: %v", svc.PulsarURL, err)
		}
		defer producer.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("over TLS")}); err != nil {
			t.Fatalf("sending over TLS: %v", err)
		}
	})
	t.Run("pulsar admin", func(t *testing.T) {
		admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		tenants, err := admin.Tenants().List()
		if err != nil || len(tenants) == 0 {
			t.Fatalf("listing tenants over HTTPS: %v, %v", tenants, err)
		}
		httpClient, err := svc.PulsarHTTPClient(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := httpClient.Get(svc.PulsarAdminURL + "/admin/v2/brokers/health")
		if err != nil {
			t.Fatalf("GET over HTTPS: %v", err)
		}
		resp.Body.Close()
	})
	t.Run("cassandra", func(t *testing.T) {
		cluster, err := svc.CassandraCluster()
		if err != nil {
			t.Fatal(err)
		}
		if cluster.SslOpts == nil {
			t.Fatal("a CA file gave no TLS")
		}
		cluster.Timeout, cluster.ConnectTimeout = 20*time.Second, 10*time.Second
		session, err := cluster.CreateSession()
		if err != nil {
			t.Fatalf("connecting to Cassandra over TLS: %v", err)
		}
		defer session.Close()
		var version string
		if err := session.Query("SELECT release_version FROM system.local").Scan(&version); err != nil || version == "" {
			t.Fatalf("querying over TLS: %q, %v", version, err)
		}
	})
	t.Run("the sink", func(t *testing.T) {
		user, password, err := svc.CassandraCredentials()
		if err != nil {
			t.Fatal(err)
		}
		settings, err := cassandra.ParseSettings(map[string]any{"hosts": svc.CassandraHost, "tls_ca_file": ca})
		if err != nil {
			t.Fatal(err)
		}
		settings.Username, settings.Password = user, password
		session, err := cassandra.NewSession(settings)
		if err != nil {
			t.Fatalf("the sink connecting over TLS: %v", err)
		}
		session.Close()
	})
}

// Without the stack's CA the system's CAs do not vouch for the stack's
// certificate: every client refuses the connection.
func TestTLSRefusesAnUntrustedServer(t *testing.T) {
	svc, _ := tlsServices(t)
	svc.CassandraTLSCAFile = ""
	svc.PulsarTLSTrustCertsFile = ""

	t.Run("pulsar", func(t *testing.T) {
		opts := svc.PulsarClientOptions()
		opts.OperationTimeout, opts.ConnectionTimeout = 5*time.Second, 5*time.Second
		client, err := pulsar.NewClient(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		if p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/" + uniqueName("tls-")}); err == nil {
			p.Close()
			t.Fatal("a producer connected to a broker whose certificate nobody trusted")
		}
	})
	t.Run("pulsar admin", func(t *testing.T) {
		admin, err := pulsaradmin.NewClient(svc.PulsarAdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Tenants().List(); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("listing tenants with an untrusted certificate: %v, want a certificate error", err)
		}
	})
	t.Run("cassandra", func(t *testing.T) {
		t.Setenv("FOLDLINE_CASSANDRA_TLS", "true") // TLS with the system's CAs only
		s, err := services.LoadForTests()
		if err != nil {
			t.Fatal(err)
		}
		cluster, err := s.CassandraCluster()
		if err != nil {
			t.Fatal(err)
		}
		cluster.Timeout, cluster.ConnectTimeout = 5*time.Second, 5*time.Second
		if session, err := cluster.CreateSession(); err == nil {
			session.Close()
			t.Fatal("connected to a Cassandra whose certificate nobody trusted")
		}
	})
	t.Run("the sink", func(t *testing.T) {
		settings, err := cassandra.ParseSettings(map[string]any{"hosts": svc.CassandraHost, "tls": true, "timeout": "5s"})
		if err != nil {
			t.Fatal(err)
		}
		if session, err := cassandra.NewSession(settings); err == nil {
			session.Close()
			t.Fatal("the sink connected to a Cassandra whose certificate nobody trusted")
		}
	})
}
