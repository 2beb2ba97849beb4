package deploy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/foldline/foldline/admin/internal/exitcode"
)

// With a Kubernetes secret name the functions' secrets refer to the
// secret's keys, and kubernetes-secret prints that secret with the values.
func TestKubernetesSecrets(t *testing.T) {
	id := identity{Role: "tenant-shop", PulsarToken: "tok", CassandraUser: "tenant-shop", CassandraPassword: "pw"}
	refs := id.secrets(true, "foldline-shop")
	for _, key := range []string{"token", "cassandraUser", "cassandraPassword"} {
		ref, ok := refs[key].(map[string]any)
		if !ok || ref["path"] != "foldline-shop" || ref["key"] != key {
			t.Errorf("secret %s = %v, want a reference to foldline-shop's key %s", key, refs[key], key)
		}
	}
	if plain := id.secrets(false, ""); plain["token"] != "tok" || plain["cassandraUser"] != nil {
		t.Errorf("a function's clear-text secrets %v, want its token only", plain)
	}
	var out bytes.Buffer
	if err := WriteKubernetesSecret(&out, "foldline-shop", "fn", "shop", id.secretValues(true)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Secret", "name: foldline-shop", "namespace: fn", "foldline.io/tenant: shop",
		"token: " + base64.StdEncoding.EncodeToString([]byte("tok")), "cassandraPassword: " + base64.StdEncoding.EncodeToString([]byte("pw"))} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("secret manifest lacks %q:\n%s", want, out.String())
		}
	}
	for _, bad := range []string{"Foldline", "a_b", "-x", "x\nkind: Pod"} {
		if err := checkKubernetesSecret(bad); !errors.Is(err, exitcode.ErrUsage) {
			t.Errorf("secret name %q: %v, want a usage error", bad, err)
		}
	}
}
