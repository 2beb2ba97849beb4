package pf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// fixtureConf is the exact -instance-conf a Pulsar 4.0.8 worker passed to a
// Go function binary (captured on this machine kind).
func fixtureConf(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "instance-conf-pulsar-4.0.8.json"))
	if err != nil {
		t.Fatalf("reading the fixture of a real instance config: %v", err)
	}
	return raw
}

func TestParseConfFromRealWorkerConfig(t *testing.T) {
	c, err := parseConf(fixtureConf(t))
	if err != nil {
		t.Fatal(err)
	}
	want := instanceConf{
		ServiceURL: "pulsar://127.0.0.1:6650", Port: 37667, MetricsPort: 44825, ClusterName: "standalone",
		Tenant: "public", Namespace: "default", Name: "shop-validate",
		FuncID: "55b5ae11-1e88-496f-8fe8-0eff0cc284a6", AutoAck: true, Guarantee: atLeastOnce,
		SubscriptionName: "validate-v2", SubscriptionType: pulsar.Failover,
		SubscriptionPosition: pulsar.SubscriptionPositionEarliest,
		OutputTopic:          "persistent://public/default/valid", Client: DefaultClientSettings(),
		DeadLetterTopic: "persistent://public/default/shop-validate-DLQ", MaxRetries: 3,
		RetryBackoff: defaultRetryBackoff,
	}
	got := *c
	got.Inputs, got.UserConfig, got.FuncVersion = nil, nil, ""
	if got.ServiceURL != want.ServiceURL || got.Port != want.Port || got.MetricsPort != want.MetricsPort ||
		got.Tenant != want.Tenant || got.Namespace != want.Namespace || got.Name != want.Name ||
		got.FuncID != want.FuncID || got.AutoAck != want.AutoAck || got.Guarantee != want.Guarantee ||
		got.SubscriptionName != want.SubscriptionName || got.SubscriptionType != want.SubscriptionType ||
		got.SubscriptionPosition != want.SubscriptionPosition || got.OutputTopic != want.OutputTopic ||
		got.Client != want.Client || got.DeadLetterTopic != want.DeadLetterTopic ||
		got.MaxRetries != want.MaxRetries || got.RetryBackoff != want.RetryBackoff || got.ClusterName != want.ClusterName {
		t.Errorf("parsed config\n got %+v\nwant %+v", got, want)
	}
	if len(c.Inputs) != 1 || c.Inputs[0] != (inputSpec{Topic: "persistent://public/default/ledger", ReceiverQueueSize: DefaultReceiverQueueSize}) {
		t.Errorf("inputs = %+v", c.Inputs)
	}
	if c.UserConfig["dlq"] != "persistent://public/default/dead" {
		t.Errorf("user config = %v", c.UserConfig)
	}
}

// The flat keys alone (workers before Pulsar 3.3) give the same essentials.
func TestParseConfFallsBackToFlatKeys(t *testing.T) {
	raw := strings.Replace(string(fixtureConf(t)), `"functionDetails":`, `"functionDetailsIgnored":`, 1)
	c, err := parseConf([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tenant != "public" || c.Namespace != "default" || c.Name != "shop-validate" ||
		c.SubscriptionName != "validate-v2" || c.SubscriptionPosition != pulsar.SubscriptionPositionEarliest ||
		c.OutputTopic != "persistent://public/default/valid" || len(c.Inputs) != 1 || c.MaxRetries != 3 {
		t.Errorf("parsed flat config: %+v", c)
	}
}

// detailsJSON is a minimal instance config whose functionDetails are given.
func detailsJSON(details string) string {
	return `{"pulsarServiceURL":"pulsar://h:6650","port":1,"metricsPort":2,"functionDetails":` +
		quoteJSON(details) + `}`
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

const baseDetails = `{"tenant":"t","namespace":"n","name":"f","source":{"inputSpecs":{"persistent://t/n/in":{}}}`

func TestParseConfDetails(t *testing.T) {
	tests := []struct {
		name    string
		details string
		check   func(*testing.T, *instanceConf)
	}{
		{
			name:    "defaults",
			details: baseDetails + `}`,
			check: func(t *testing.T, c *instanceConf) {
				if c.SubscriptionName != "t/n/f" || c.SubscriptionType != pulsar.Shared ||
					c.SubscriptionPosition != pulsar.SubscriptionPositionLatest ||
					c.DeadLetterTopic != "persistent://t/n/f-DLQ" || c.MaxRetries != defaultMaxRetries ||
					c.Guarantee != atLeastOnce || c.Client != DefaultClientSettings() || c.KeyBasedBatching ||
					c.Runtime != (RuntimeSettings{GCPercent: DefaultGCPercent, MemoryLimitMB: DefaultMemoryLimitMB, MaxProcs: DefaultMaxProcs}) {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name: "user config overrides",
			details: baseDetails + `,"userConfig":"{\"deadLetterTopic\":\"persistent://t/n/dead\",\"maxRetries\":0.0,` +
				`\"retryBackoffMs\":\"20\",\"subscriptionType\":\"key_shared\",\"gcPercent\":150.0,\"memoryLimitMB\":0,\"maxProcs\":0}","retainOrdering":true}`,
			check: func(t *testing.T, c *instanceConf) {
				if c.DeadLetterTopic != "persistent://t/n/dead" || c.MaxRetries != 0 ||
					c.RetryBackoff != 20*time.Millisecond || c.SubscriptionType != pulsar.KeyShared ||
					c.Runtime != (RuntimeSettings{GCPercent: 150}) {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name: "regex input, queue size, producer spec, guarantee",
			details: `{"tenant":"t","namespace":"n","name":"f","processingGuarantees":"ATMOST_ONCE",` +
				`"source":{"subscriptionType":"KEY_SHARED","inputSpecs":{"persistent://t/n/in-.*":{"isRegexPattern":true,"receiverQueueSize":{"value":7}}}},` +
				`"sink":{"topic":"persistent://t/n/out","producerSpec":{"compressionType":"ZSTD","batchBuilder":"KEY_BASED","maxPendingMessages":9}},` +
				`"someFieldFromTheFuture":{"x":1}}`,
			check: func(t *testing.T, c *instanceConf) {
				if len(c.Inputs) != 1 || c.Inputs[0] != (inputSpec{Topic: "persistent://t/n/in-.*", IsRegex: true, ReceiverQueueSize: 7}) {
					t.Errorf("inputs %+v", c.Inputs)
				}
				if c.Guarantee != atMostOnce || c.SubscriptionType != pulsar.KeyShared || c.Client.Compression != pulsar.ZSTD ||
					!c.KeyBasedBatching || c.Client.MaxPendingMessages != 9 || c.OutputTopic != "persistent://t/n/out" {
					t.Errorf("%+v", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConf([]byte(detailsJSON(tt.details)))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// The worker hands every instance its own (superuser) credentials: an
// instance without a token of its own must not run with them.
func TestParseConfRefusesTheWorkerToken(t *testing.T) {
	tests := []struct{ name, secrets string }{
		{name: "no secrets", secrets: ``},
		{name: "other secrets only", secrets: `,"secretsMap":"{\"cassandraUser\":\"u\"}"`},
	}
	for _, params := range []string{"token:abc", "abc", "file:///worker/token"} {
		for _, tt := range tests {
			t.Run(tt.name+" "+params, func(t *testing.T) {
				raw := `{"clientAuthenticationPlugin":"org.apache.pulsar.client.impl.auth.AuthenticationToken",` +
					`"clientAuthenticationParameters":` + quoteJSON(params) + `,` + detailsJSON(baseDetails + tt.secrets + `}`)[1:]
				c, err := parseConf([]byte(raw))
				if !errors.Is(err, ErrWorkerCredentials) || !errors.Is(err, ErrBadConfig) {
					t.Fatalf("error = %v (token %q), want ErrWorkerCredentials", err, c.tokenOrEmpty())
				}
			})
		}
	}
}

// Without an authentication plugin (an open Pulsar) an instance runs with
// no credentials; with a secret token, with that token; its other secrets
// reach the handler.
func TestParseConfOpenAndSecrets(t *testing.T) {
	tests := []struct{ name, prefix, secrets, wantToken string }{
		{name: "open", secrets: ``},
		{name: "open with a token", secrets: `,"secretsMap":"{\"token\":\"t1\",\"cassandraUser\":\"u\"}"`, wantToken: "t1"},
		{name: "worker credentials and a token", prefix: `"clientAuthenticationPlugin":"org.apache.pulsar.client.impl.auth.AuthenticationToken","clientAuthenticationParameters":"token:worker",`,
			secrets: `,"secretsMap":"{\"token\":\"t1\",\"cassandraUser\":\"u\"}"`, wantToken: "t1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{` + tt.prefix + detailsJSON(baseDetails + tt.secrets + `}`)[1:]
			c, err := parseConf([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if c.Token != tt.wantToken {
				t.Errorf("token = %q, want %q", c.Token, tt.wantToken)
			}
			if tt.secrets != "" && c.Secrets["cassandraUser"] != "u" {
				t.Errorf("secrets = %v, want cassandraUser u", c.Secrets)
			}
		})
	}
}

// On Pulsar's Kubernetes runtime the secrets map holds references to
// Kubernetes secrets ({"path", "key"}), which the worker binds to
// environment variables named after each secret: the runtime reads those.
func TestParseConfKubernetesSecrets(t *testing.T) {
	secrets := `,"secretsMap":"{\"token\":{\"path\":\"foldline-shop\",\"key\":\"token\"},\"cassandraUser\":{\"path\":\"foldline-shop\",\"key\":\"cassandraUser\"}}"`
	raw := `{"clientAuthenticationPlugin":"org.apache.pulsar.client.impl.auth.AuthenticationToken","clientAuthenticationParameters":"token:worker",` + detailsJSON(baseDetails + secrets + `}`)[1:]
	t.Setenv("token", "tenant-token")
	t.Setenv("cassandraUser", "tenant-shop")
	c, err := parseConf([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "tenant-token" || c.Secrets["cassandraUser"] != "tenant-shop" {
		t.Errorf("token %q, secrets %v; want the environment's", c.Token, c.Secrets)
	}
	os.Unsetenv("token")
	if _, err := parseConf([]byte(raw)); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "the environment has no token") {
		t.Errorf("a reference without its variable: %v, want ErrBadConfig naming it", err)
	}
}

func TestParseConfNamesTheBadKey(t *testing.T) {
	tests := []struct{ name, conf, key string }{
		{name: "port is a string", conf: `{"port":"x"}`, key: `"port"`},
		{name: "function details not JSON", conf: `{"functionDetails":"{nope"}`, key: `"functionDetails"`},
		{name: "user config not JSON", conf: detailsJSON(baseDetails + `,"userConfig":"[1"}`), key: `"userConfig"`},
		{name: "maxRetries not a number", conf: detailsJSON(baseDetails + `,"userConfig":"{\"maxRetries\":true}"}`), key: `"maxRetries"`},
		{name: "maxRetries negative", conf: detailsJSON(baseDetails + `,"userConfig":"{\"maxRetries\":-1}"}`), key: `"maxRetries"`},
		{name: "gcPercent negative", conf: detailsJSON(baseDetails + `,"userConfig":"{\"gcPercent\":-1}"}`), key: `"gcPercent"`},
		{name: "memoryLimitMB not a number", conf: detailsJSON(baseDetails + `,"userConfig":"{\"memoryLimitMB\":\"lots\"}"}`), key: `"memoryLimitMB"`},
		{name: "retryBackoffMs fractional", conf: detailsJSON(baseDetails + `,"userConfig":"{\"retryBackoffMs\":1.5}"}`), key: `"retryBackoffMs"`},
		{name: "dead letter topic empty", conf: detailsJSON(baseDetails + `,"userConfig":"{\"deadLetterTopic\":\"\"}"}`), key: `"deadLetterTopic"`},
		{name: "unknown subscription type", conf: detailsJSON(baseDetails + `,"userConfig":"{\"subscriptionType\":\"exclusive\"}"}`), key: `"subscriptionType"`},
		{name: "secret token not a string", conf: detailsJSON(baseDetails + `,"secretsMap":"{\"token\":{\"path\":\"x\"}}"}`), key: `"secretsMap"`},
		{name: "no service URL", conf: `{"functionDetails":` + quoteJSON(baseDetails+`}`) + `}`, key: `"pulsarServiceURL"`},
		{name: "no inputs", conf: detailsJSON(`{"tenant":"t","namespace":"n","name":"f"}`), key: `"sourceInputSpecs"`},
		{name: "unsupported auth", conf: `{"clientAuthenticationPlugin":"org.example.Kerberos",` + detailsJSON(baseDetails + `}`)[1:], key: `"clientAuthenticationPlugin"`},
		{name: "effectively once", conf: detailsJSON(baseDetails + `,"processingGuarantees":"EFFECTIVELY_ONCE"}`), key: `"processingGuarantees"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConf([]byte(tt.conf))
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error = %v, want ErrBadConfig", err)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name key %s", err, tt.key)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "conf.yaml")
	yamlConf := "pulsarServiceURL: pulsar://h:6650\ntenant: t\nnameSpace: \"n\"\nname: f\nsourceSpecsTopic: persistent://t/n/in\n"
	if err := os.WriteFile(yamlPath, []byte(yamlConf), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{name: "inline JSON", args: []string{"-instance-conf", detailsJSON(baseDetails + `}`)}},
		{name: "YAML file", args: []string{"-instance-conf-path", yamlPath}},
		{name: "missing file", args: []string{"-instance-conf-path", filepath.Join(dir, "nope")}, wantErr: true},
		{name: "no config", args: nil, wantErr: true},
		{name: "unknown flag", args: []string{"-bogus"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseArgs(tt.args, &strings.Builder{})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.FQFN() != "t/n/f" || len(c.Inputs) != 1 || c.Inputs[0].Topic != "persistent://t/n/in" {
				t.Errorf("parsed %+v", c)
			}
		})
	}
}

func (c *instanceConf) tokenOrEmpty() string {
	if c == nil {
		return ""
	}
	return c.Token
}
