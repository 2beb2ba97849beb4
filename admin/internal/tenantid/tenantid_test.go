package tenantid

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestSignIsAValidHS256JWT(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	tok := Sign(key, "tenant-shop")
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d parts, want 3", tok, len(parts))
	}
	tests := []struct {
		name string
		part string
		want map[string]string
	}{
		{"header", parts[0], map[string]string{"alg": "HS256"}},
		{"claims", parts[1], map[string]string{"sub": "tenant-shop"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := base64.RawURLEncoding.DecodeString(tc.part)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%s = %v, want %v", tc.name, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s[%s] = %q, want %q", tc.name, k, got[k], v)
				}
			}
		})
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(parts[0] + "." + parts[1]))
	if want := base64.RawURLEncoding.EncodeToString(h.Sum(nil)); parts[2] != want {
		t.Errorf("signature %s, want %s", parts[2], want)
	}
}

func TestDeriveIsStableAndPerTenant(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a1, a2, b := Derive(key, "a"), Derive(key, "a"), Derive(key, "b")
	if a1 != a2 {
		t.Errorf("Derive is not stable: %+v vs %+v", a1, a2)
	}
	if a1.CassandraPassword == b.CassandraPassword || a1.PulsarToken == b.PulsarToken {
		t.Errorf("tenants a and b share a secret: %+v, %+v", a1, b)
	}
	other := Derive([]byte("fedcba9876543210fedcba9876543210"), "a")
	if other.CassandraPassword == a1.CassandraPassword {
		t.Error("the Cassandra password does not depend on the key")
	}
	if a1.Role != "tenant-a" {
		t.Errorf("role %q, want tenant-a", a1.Role)
	}
}
