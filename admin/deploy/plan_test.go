package deploy

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// A plan names the secrets that differ and never prints their values, in
// its text or its JSON: after a key rotation both the old and the new
// password would otherwise end up in the terminal and in CI logs.
func TestPlanNeverPrintsSecrets(t *testing.T) {
	const (
		oldToken, newToken       = "eyOLD.token.value", "eyNEW.token.value"
		oldPassword, newPassword = "old-cassandra-pw", "new-cassandra-pw"
	)
	have := utils.FunctionConfig{Name: "sink", Parallelism: 1, UserConfig: map[string]any{},
		Secrets: map[string]any{"token": oldToken, "cassandraPassword": oldPassword, "gone": "gone-secret-value"}}
	want := utils.FunctionConfig{Name: "sink", Parallelism: 1, UserConfig: map[string]any{},
		Secrets: map[string]any{"token": newToken, "cassandraPassword": newPassword, "cassandraUser": "tenant-shop-user"}}
	details := configDifferences(have, want)

	for _, line := range []string{
		"secrets.cassandraPassword (secret changed)",
		"secrets.token (secret changed)",
		"secrets.cassandraUser (secret added)",
		"secrets.gone (secret removed)",
	} {
		if !slices.Contains(details, line) {
			t.Errorf("details %q lack %q", details, line)
		}
	}

	plan := &Plan{Tenant: "shop", Keyspace: "shop", Changes: []Change{{Action: Update, Kind: "function", Name: "shop/views/sink", Details: details}}}
	var text bytes.Buffer
	plan.Write(&text, true)
	js, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), string(js)} {
		for _, secret := range []string{oldToken, newToken, oldPassword, newPassword, "tenant-shop-user", "gone-secret-value"} {
			if strings.Contains(out, secret) {
				t.Errorf("the plan prints secret %q:\n%s", secret, out)
			}
		}
	}

	// Unchanged secrets are not mentioned at all.
	if d := configDifferences(want, want); slices.ContainsFunc(d, func(s string) bool { return strings.HasPrefix(s, "secrets.") }) {
		t.Errorf("same secrets: details %q mention secrets", d)
	}
}
