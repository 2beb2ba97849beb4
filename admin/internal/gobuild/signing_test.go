package gobuild

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// prebuiltDir writes a prebuilt folder as foldline build leaves it: one
// binary of pkg and the index, signed with key.
func prebuiltDir(t *testing.T, keyFile string) (dir string, bin Binary) {
	t.Helper()
	key, _, err := SigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	bin = writeBinary(t, dir, "the binary built")
	if err := WriteIndex(dir, DefaultPlatform, map[string]Binary{bin.Package: bin}, key); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// writeBinary writes a fake binary of package p into dir.
func writeBinary(t *testing.T, dir, content string) Binary {
	t.Helper()
	path := filepath.Join(dir, FileName("example.com/m/cmd", DefaultPlatform))
	_ = os.Remove(path)
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return Binary{Package: "example.com/m/cmd", Path: path, SHA256: sha256Of(t, path), Platform: DefaultPlatform}
}

// The index of a prebuilt folder lies next to the binaries: a binary
// replaced together with a rewritten index, signed with another key or
// not at all, is refused; the deployer's key, or its public half, accepts
// foldline build's own.
func TestPrebuiltIndexMustBeSigned(t *testing.T) {
	keys := t.TempDir()
	deployerKey, attackerKey := filepath.Join(keys, "deployer.key"), filepath.Join(keys, "attacker.key")
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		key    string
		want   error
	}{
		{name: "as built, the private key", key: deployerKey},
		{name: "as built, the public key", key: deployerKey + ".pub"},
		{name: "a binary replaced, the index rewritten, the signature kept", key: deployerKey, want: ErrPrebuilt,
			tamper: func(t *testing.T, dir string) {
				bin := writeBinary(t, dir, "a binary of the attacker's")
				if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"platform":{"goos":"linux","goarch":"amd64"},"binaries":{"example.com/m/cmd":{"file":"`+filepath.Base(bin.Path)+`","sha256":"`+bin.SHA256+`"}}}`+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a binary replaced, the index rewritten and signed with another key", key: deployerKey, want: ErrPrebuilt,
			tamper: func(t *testing.T, dir string) {
				key, _, err := SigningKey(attackerKey)
				if err != nil {
					t.Fatal(err)
				}
				bin := writeBinary(t, dir, "a binary of the attacker's")
				if err := WriteIndex(dir, DefaultPlatform, map[string]Binary{bin.Package: bin}, key); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "no signature", key: deployerKey, want: ErrPrebuilt,
			tamper: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, SignatureFile)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a binary replaced, the index kept", key: deployerKey, want: ErrPrebuilt,
			tamper: func(t *testing.T, dir string) { writeBinary(t, dir, "a binary of the attacker's") }},
		{name: "no key to verify with", key: filepath.Join(keys, "missing.key"), want: ErrNoSigningKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, built := prebuiltDir(t, deployerKey)
			if tt.tamper != nil {
				tt.tamper(t, dir)
			}
			got, err := (&Builder{Prebuilt: dir, PrebuiltKey: tt.key}).Build(t.Context(), built.Package)
			if tt.want == nil {
				if err != nil || got.SHA256 != built.SHA256 {
					t.Fatalf("Build = %+v, %v; want %+v", got, err, built)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Build = %+v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// The signing key is made once, private, with its public key next to it;
// two builds that make it at once end with the same key.
func TestSigningKeyIsMadeOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "foldline", SigningKeyName)
	keys := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, _, err := SigningKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i := range keys {
		if string(keys[i]) != string(keys[0]) {
			t.Fatalf("SigningKey made %d different keys", len(keys))
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v, %v; want -rw-------", path, info, err)
	}
	again, created, err := SigningKey(path)
	if err != nil || created || string(again) != string(keys[0]) {
		t.Errorf("SigningKey of an existing key: created %v, %v; want the same key", created, err)
	}
	if _, err := verifyingKey(path + ".pub"); err != nil {
		t.Errorf("the public key: %v", err)
	}
}
