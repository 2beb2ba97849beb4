package pf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldline/foldline/internal/testenv"
)

// pulsarAdmin runs the distribution's pulsar-admin (through scripts/, which
// points it at the local stack) and returns its standard output.
func pulsarAdmin(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "scripts", "pulsar-admin"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pulsar-admin %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// functionSecrets is the secrets map of a test function: the stack's own
// token as the secret "token", which the runtime connects with (it refuses
// the worker's); "{}" on an open stack.
func functionSecrets(t *testing.T, s testenv.Services) string {
	t.Helper()
	token, err := s.PulsarTokenValue()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	if token != "" {
		secrets["token"] = token
	}
	raw, err := json.Marshal(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// adminREST calls the broker's (or worker's) HTTP API and decodes a JSON
// answer into out when out is not nil (a *string gets the body as is). It
// returns the HTTP status.
func adminREST(t *testing.T, s testenv.Services, method, path string, out any) int {
	t.Helper()
	// Not t.Context(): cleanups call this after it is cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.PulsarAdminURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AuthorizePulsar(req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if text, ok := out.(*string); ok {
		*text = string(body)
		return resp.StatusCode
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, path, body, err)
		}
	}
	return resp.StatusCode
}

// buildExample builds functions/examples/<name> into a temporary folder.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./functions/examples/"+name)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building example %s: %v\n%s", name, err, out)
	}
	return bin
}
