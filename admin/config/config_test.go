package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foldline/foldline/internal/services"
)

const file = `current-context: local
contexts:
  - name: local
  - name: prod
    pulsar:
      url: pulsar+ssl://broker.example.com:6651
      token: sekrit
    cassandra:
      hosts: [c1.example.com:9042]
`

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestContexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(services.ConfigSetting.Env, path)
	t.Setenv(services.ContextSetting.Env, "")

	out, err := run(t, "get-contexts")
	if err != nil || !strings.Contains(out, "*        local") || !strings.Contains(out, "prod   pulsar+ssl://broker.example.com:6651  c1.example.com:9042") {
		t.Errorf("get-contexts: %v\n%s", err, out)
	}
	if out, err := run(t, "use-context", "prod"); err != nil || !strings.Contains(out, `switched to context "prod"`) {
		t.Errorf("use-context: %v\n%s", err, out)
	}
	if out, err := run(t, "current-context"); err != nil || strings.TrimSpace(out) != "prod" {
		t.Errorf("current-context after use-context prod: %v, %q", err, out)
	}
	out, err = run(t, "view", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res ViewResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("view -o json: %v\n%s", err, out)
	}
	got := map[string]services.SettingValue{}
	for _, v := range res.Settings {
		got[v.Key] = v
	}
	if res.Context != "prod" || got["pulsar.url"].Value != "pulsar+ssl://broker.example.com:6651" || !strings.Contains(got["pulsar.url"].Source, `context "prod"`) {
		t.Errorf("view: %+v", res)
	}
	if strings.Contains(out, "sekrit") || got["pulsar.token"].Value != "(set)" {
		t.Errorf("view shows the token: %+v", got["pulsar.token"])
	}
	if got["pulsar.token-file"].Value != "" || got["cassandra.password-file"].Value != "" {
		t.Errorf("a remote context got the local stack's credentials: %+v %+v", got["pulsar.token-file"], got["cassandra.password-file"])
	}
	if _, err := run(t, "use-context", "staging"); err == nil {
		t.Error("use-context of an unknown context succeeded")
	}
}
