package gobuild

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/foldline/foldline/internal/plainfile"
	"github.com/foldline/foldline/internal/services"
)

// The index of a prebuilt directory lies next to the binaries, where
// whoever may replace a binary may rewrite the index too: deploy trusts
// it only when it carries the signature of a key the deployer holds.
// foldline build signs the index (its exact bytes) with an Ed25519 key of
// its own — not the Pulsar token signing key, which mints superusers'
// tokens and has no business on a CI runner — kept in foldline's config
// folder and made on the first build; deploy verifies with that key, or
// with its public half alone (a machine that deploys need not be able to
// sign).

// SignatureFile names the signature of IndexFile, next to it: the
// base64 of the Ed25519 signature of the index's bytes.
const SignatureFile = IndexFile + ".sig"

// SigningKeyName is the name of the signing key's file in foldline's
// config folder; its public key is written next to it, with ".pub".
const SigningKeyName = "binaries.key"

// DefaultSigningKeyFile is where foldline build keeps the key it signs
// indexes with, and where deploy looks for the key to verify them with
// unless told.
func DefaultSigningKeyFile() string {
	dir := services.ConfigDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, SigningKeyName)
}

// maxKeyBytes bounds a key file: a PEM key is a few hundred bytes.
const maxKeyBytes = 64 << 10

// ErrNoSigningKey is returned when there is no key to sign an index with
// or to verify one with.
var ErrNoSigningKey = errors.New("no key for the binaries' index")

// SigningKey reads the private key at path, or, when there is none,
// makes one (with its public key at path.pub) and says so. Two builds
// that make one at once end with one key: the file is linked into place,
// never overwritten.
func SigningKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	if path == "" {
		return nil, false, fmt.Errorf("%w: no config folder to keep it in (set --signing-key)", ErrNoSigningKey)
	}
	key, err = readPrivateKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("making the binaries' signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the binaries' signing key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, false, fmt.Errorf("encoding the binaries' signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("making the binaries' signing key: %w", err)
	}
	if err := linkNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); errors.Is(err, fs.ErrExist) {
		key, err = readPrivateKey(path) // another build made it meanwhile
		return key, false, err
	} else if err != nil {
		return nil, false, fmt.Errorf("writing the binaries' signing key: %w", err)
	}
	if err := plainfile.WriteAtomic(path+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, false, fmt.Errorf("writing the binaries' public key: %w", err)
	}
	return key, true, nil
}

// linkNew writes data, synced, to a new file at path of mode perm, and
// fails with fs.ErrExist when path exists: it is written aside, then
// hard-linked into place.
func linkNew(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".new-" + base64.RawURLEncoding.EncodeToString(randomBytes(6))
	if err := plainfile.WriteAtomic(tmp, data, perm); err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, path)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// readKeyFile reads a PEM key file, warning when others may read it.
func readKeyFile(path string) (*pem.Block, error) {
	data, info, err := plainfile.ReadLinked(path, maxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the binaries' key %s: %w", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("reading the binaries' key %s: no PEM block in it", path)
	}
	if block.Type == "PRIVATE KEY" {
		services.WarnShared(path, info)
	}
	return block, nil
}

func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	block, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("reading the binaries' key %s: a %s, want a PRIVATE KEY to sign with", path, block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	key, ok := k.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("reading the binaries' key %s: not an Ed25519 private key (%v)", path, err)
	}
	return key, nil
}

// verifyingKey reads the key to verify indexes with from path: a public
// key, or the private key foldline build signs with.
func verifyingKey(path string) (ed25519.PublicKey, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no config folder to find it in (set --binaries-key)", ErrNoSigningKey)
	}
	block, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist: give deploy the key foldline build signed the index with (--binaries-key; its public key, %s.pub, is enough)", ErrNoSigningKey, path, SigningKeyName)
	}
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if key, ok := k.(ed25519.PublicKey); err == nil && ok {
			return key, nil
		}
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if key, ok := k.(ed25519.PrivateKey); err == nil && ok {
			return key.Public().(ed25519.PublicKey), nil
		}
	}
	return nil, fmt.Errorf("reading the binaries' key %s: want an Ed25519 PUBLIC KEY or PRIVATE KEY in PEM, found a %s", path, block.Type)
}

// checkSignature checks that sig (SignatureFile's content) signs index
// with key.
func checkSignature(key ed25519.PublicKey, index, sig []byte) bool {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	return err == nil && ed25519.Verify(key, index, raw)
}

// sign returns SignatureFile's content for index.
func sign(key ed25519.PrivateKey, index []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(key, index)) + "\n")
}
