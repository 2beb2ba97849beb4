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
	a1, a2, b := Derive(key, "a", 0), Derive(key, "a", 0), Derive(key, "b", 0)
	if a1 != a2 {
		t.Errorf("Derive is not stable: %+v vs %+v", a1, a2)
	}
	if a1.CassandraPassword == b.CassandraPassword || a1.PulsarToken == b.PulsarToken {
		t.Errorf("tenants a and b share a secret: %+v, %+v", a1, b)
	}
	other := Derive([]byte("fedcba9876543210fedcba9876543210"), "a", 0)
	if other.CassandraPassword == a1.CassandraPassword {
		t.Error("the Cassandra password does not depend on the key")
	}
	if a1.Role != "tenant-a" {
		t.Errorf("role %q, want tenant-a", a1.Role)
	}
}

func TestAPurgedNameGetsNewSecrets(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	first, second, third := Derive(key, "a", 0), Derive(key, "a", 1), Derive(key, "a", 2)
	if first.Role != "tenant-a" || second.Role != "tenant-a_1" || third.Role != "tenant-a_2" {
		t.Errorf("roles %q, %q, %q; want tenant-a, tenant-a_1, tenant-a_2", first.Role, second.Role, third.Role)
	}
	seen := map[string]bool{}
	for _, id := range []Identity{first, second, third} {
		for _, secret := range []string{id.PulsarToken, id.CassandraPassword} {
			if seen[secret] {
				t.Errorf("two generations of tenant a share a secret: %+v", id)
			}
			seen[secret] = true
		}
	}
}

func TestIsRoleOf(t *testing.T) {
	tests := []struct {
		role, tenant string
		want         bool
	}{
		{"tenant-a", "a", true},
		{"tenant-a_1", "a", true},
		{"tenant-a_12", "a", true},
		{"tenant-a_0", "a", false},
		{"tenant-a_01", "a", false},
		{"tenant-a_", "a", false},
		{"tenant-a_x", "a", false},
		{"tenant-a-b", "a", false}, // tenant a-b's role
		{"tenant-ab", "a", false},
		{"tenant-a_1_2", "a", false},
		{"tenant-a", "a-b", false},
		{"cassandra", "a", false},
	}
	for _, tc := range tests {
		if got := IsRoleOf(tc.role, tc.tenant); got != tc.want {
			t.Errorf("IsRoleOf(%q, %q) = %v, want %v", tc.role, tc.tenant, got, tc.want)
		}
	}
}
