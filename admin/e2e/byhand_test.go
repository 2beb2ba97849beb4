package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/internal/testenv"
)

// TestDeployByHandAsDocumented runs the commands of "Deploying a function
// by hand" (docs/transformations.md) as they are written there, with the
// shop's tenant renamed to the test's: stock pulsar-admin, through
// scripts/pulsar-admin, run from the checkout with the function config
// file's relative path, and the tenant's token taken from its credentials
// file. The function runs and takes the ledger's events. Then the same
// function without its token: its instance does not run, and functions
// status says why.
func TestDeployByHandAsDocumented(t *testing.T) {
	s := deployShop(t, "byhand")
	if s.svc.PulsarSecretKeyFile == "" {
		t.Skip("the stack runs open: tenants have no token of their own to give a function by hand")
	}
	s.ingest(t, generate(t, 50, 45))
	root := testenv.RepoRoot()
	config := tenantCopy(t, filepath.Join(root, "manifests", "functions", "validate.yaml"), s.tenant)
	rel, err := filepath.Rel(root, config)
	if err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer(
		"manifests/functions/validate.yaml", rel,
		"/tmp/validate", filepath.Join(t.TempDir(), "validate"),
		"tenants/shop.env", "tenants/"+s.tenant+".env",
		"persistent://shop/", "persistent://"+s.tenant+"/",
		"--tenant shop", "--tenant "+s.tenant,
	).Replace(docBlock(t, filepath.Join(root, "docs", "transformations.md"), "## Deploying a function by hand"))
	functions := mustClients(t, s.svc).Functions
	t.Cleanup(func() { _ = functions.DeleteFunction(s.tenant, "pipeline", "validate-by-hand") })
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	t.Logf("the documented commands:\n%s\nsaid:\n%s", script, out)
	if err != nil {
		t.Fatalf("the documented commands: %v", err)
	}
	testenv.WaitFor(t, 3*time.Minute, "validate-by-hand to run and take the ledger's events", func() bool {
		st, err := functions.GetFunctionStatus(s.tenant, "pipeline", "validate-by-hand")
		return err == nil && st.NumRunning == 1 && len(st.Instances) == 1 && st.Instances[0].Status.NumReceived > 0
	})

	t.Run("without its token functions status says why", func(t *testing.T) {
		const name = "validate-no-token"
		t.Cleanup(func() { _ = functions.DeleteFunction(s.tenant, "pipeline", name) })
		bin := filepath.Join(t.TempDir(), "validate")
		build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./functions/shop/validate/cmd")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		pulsarAdminCLI(t, root, "functions", "create", "--function-config-file", rel, "--go", bin,
			"--name", name, "--subs-name", name, "--output", "persistent://"+s.tenant+"/pipeline/"+name)
		var st utils.FunctionStatus
		var raw []byte
		testenv.WaitFor(t, 3*time.Minute, "functions status to say why "+name+" does not run", func() bool {
			raw = pulsarAdminCLI(t, root, "functions", "status", "--tenant", s.tenant, "--namespace", "pipeline", "--name", name)
			st = utils.FunctionStatus{}
			return json.Unmarshal(raw, &st) == nil && len(st.Instances) == 1 && st.Instances[0].Status.Err != ""
		})
		t.Logf("functions status:\n%s", raw)
		got := st.Instances[0].Status
		const want = "refusing to run with the worker's credentials"
		if got.Running || st.NumRunning != 0 || !strings.Contains(got.Err, want) {
			t.Errorf("status: running %v (%d of %d), error %q; want not running, an error saying %q", got.Running, st.NumRunning, st.NumInstances, got.Err, want)
		}
		if n := len(got.LatestSystemExceptions); n == 0 || !strings.Contains(got.LatestSystemExceptions[n-1].ExceptionString, want) {
			t.Errorf("latest system exceptions %+v, want the reason last", got.LatestSystemExceptions)
		}
		if got.NumRestarts != 0 {
			t.Errorf("restarted %d times: an instance that exits loses its reason", got.NumRestarts)
		}
	})
}

// tenantCopy writes a copy of the shop's function config file moved to
// tenant, in a folder of the test's own, and returns its path.
func tenantCopy(t *testing.T, file, tenant string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("persistent://shop/", "persistent://"+tenant+"/", "tenant: shop", "tenant: "+tenant).Replace(string(raw))
	path := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// docBlock returns the first ```sh block after heading in the Markdown
// file doc.
func docBlock(t *testing.T, doc, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if ok {
		_, section, ok = strings.Cut(section, "\n```sh\n")
	}
	block, _, closed := strings.Cut(section, "\n```\n")
	if !ok || !closed {
		t.Fatalf("%s: no ```sh block after %q", doc, heading)
	}
	return block + "\n"
}

// pulsarAdminCLI runs scripts/pulsar-admin from dir and returns its
// standard output.
func pulsarAdminCLI(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "scripts", "pulsar-admin"), args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pulsar-admin %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
