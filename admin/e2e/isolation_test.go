package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/tenantid"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
)

// TestTenantIsolation deploys the shop pipeline as two tenants, A and B, on
// the stack with authentication (scripts/stack's default) and checks, with
// the credentials deploy gave A, that A reaches nothing of B: not B's
// topics (produce, consume, list), not B's functions, not B's keyspace, and
// that a function created by hand in A on B's ledger gets nothing. B's own
// pipeline meanwhile runs as B (its functions with B's token, its sinks
// with B's Cassandra role) and folds B's events.
func TestTenantIsolation(t *testing.T) {
	svc := testenv.All(t)
	if svc.PulsarSecretKeyFile == "" {
		t.Skip("the stack runs open (FOLDLINE_STACK_OPEN=1): no tenant identities to test")
	}
	key, err := tenantid.ReadKey(svc.PulsarSecretKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	b := deployShop(t, "isob")
	a := deployShop(t, "isoa")
	idA := tenantid.Derive(key, a.tenant)
	asA := services.Services{
		PulsarURL: svc.PulsarURL, PulsarAdminURL: svc.PulsarAdminURL, CassandraHost: svc.CassandraHost,
		PulsarToken: idA.PulsarToken, CassandraUser: idA.Role, CassandraPassword: idA.CassandraPassword,
	}
	ledgerA := "persistent://" + a.tenant + "/ledger/events"
	ledgerB := "persistent://" + b.tenant + "/ledger/events"

	t.Run("B's pipeline runs as B and folds B's events", func(t *testing.T) {
		b.ingest(t, generate(t, 500, 3))
		b.waitForFold(t, 5*time.Minute)
	})

	opts := asA.PulsarClientOptions()
	opts.OperationTimeout = 15 * time.Second
	clientA, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clientA.Close)

	t.Run("A produces to and reads its own ledger", func(t *testing.T) {
		producer, err := clientA.CreateProducer(pulsar.ProducerOptions{Topic: ledgerA})
		if err != nil {
			t.Fatalf("A producing to its own ledger: %v", err)
		}
		defer producer.Close()
		if _, err := producer.Send(t.Context(), &pulsar.ProducerMessage{Key: "k", Payload: []byte("not an event")}); err != nil {
			t.Fatalf("A sending to its own ledger: %v", err)
		}
		reader, err := clientA.CreateReader(pulsar.ReaderOptions{Topic: ledgerA, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatalf("A reading its own ledger: %v", err)
		}
		reader.Close()
	})

	t.Run("A cannot produce to B's ledger", func(t *testing.T) {
		producer, err := clientA.CreateProducer(pulsar.ProducerOptions{Topic: ledgerB})
		if err == nil {
			producer.Close()
			t.Fatal("A created a producer on B's ledger")
		}
		t.Logf("refused as expected: %v", err)
	})

	t.Run("A cannot consume B's topics", func(t *testing.T) {
		for _, topic := range []string{ledgerB, "persistent://" + b.tenant + "/pipeline/valid"} {
			consumer, err := clientA.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "steal",
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err == nil {
				consumer.Close()
				t.Fatalf("A subscribed to %s", topic)
			}
			reader, err := clientA.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
			if err == nil {
				reader.Close()
				t.Fatalf("A opened a reader on %s", topic)
			}
			t.Logf("refused as expected: %v", err)
		}
	})

	adminA, err := pulsaradmin.NewClient(asA.PulsarAdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("A lists its own topics but not B's", func(t *testing.T) {
		nsA, _ := utils.GetNamespaceName(a.tenant + "/ledger")
		if _, _, err := adminA.Topics().List(*nsA); err != nil {
			t.Fatalf("A listing its own topics: %v", err)
		}
		nsB, _ := utils.GetNamespaceName(b.tenant + "/ledger")
		_, _, err := adminA.Topics().List(*nsB)
		requireDenied(t, "A listing B's topics", err)
		_, err = adminA.Namespaces().GetNamespaces(b.tenant)
		requireDenied(t, "A listing B's namespaces", err)
		_, err = adminA.Functions().GetFunctions(b.tenant, "pipeline")
		requireDenied(t, "A listing B's functions", err)
	})

	bin := buildExclaim(t, a)
	t.Run("A cannot create a function in B", func(t *testing.T) {
		conf := &utils.FunctionConfig{Tenant: b.tenant, Namespace: "pipeline", Name: "intruder", Runtime: utils.GoRuntime,
			Inputs: []string{ledgerB}, Output: "persistent://" + b.tenant + "/pipeline/stolen"}
		v3 := asA.PulsarAdminConfig()
		v3.PulsarAPIVersion = config.V3
		fnA, err := pulsaradmin.NewClient(v3)
		if err != nil {
			t.Fatal(err)
		}
		requireDenied(t, "A creating a function in B", fnA.Functions().CreateFunc(conf, bin))
	})

	// A function created by hand in A (stock pulsar-admin, as the
	// superuser would) on B's ledger: the worker lets it be created, so
	// the instance is what must get nothing.
	stealing := []struct {
		name, secrets, wantLog string
	}{
		// No token of its own: the runtime refuses the worker's (superuser)
		// credentials and exits; the worker keeps restarting it.
		{name: "without a token of its own it refuses to start", secrets: "",
			wantLog: "refusing to run with the worker's credentials"},
		// A's token: the broker refuses A's subscription to B's ledger.
		{name: "with A's token it cannot subscribe", secrets: `{"token":"` + idA.PulsarToken + `"}`,
			wantLog: "AuthorizationError"},
	}
	for i, tc := range stealing {
		t.Run("a function in A on B's ledger: "+tc.name, func(t *testing.T) {
			name := []string{"steal-no-token", "steal-a-token"}[i]
			out := "persistent://" + a.tenant + "/pipeline/" + name
			args := []string{"functions", "create", "--go", bin, "--tenant", a.tenant, "--namespace", "pipeline", "--name", name,
				"--inputs", ledgerB, "--output", out, "--subs-position", "Earliest"}
			if tc.secrets != "" {
				args = append(args, "--secrets", tc.secrets)
			}
			cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "scripts", "pulsar-admin"), args...)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("pulsar-admin functions create: %v\n%s", err, msg)
			}
			admin := a.pulsarAdmin(t)
			t.Cleanup(func() { _ = admin.Functions().DeleteFunction(a.tenant, "pipeline", name) })
			fqfn := a.tenant + "/pipeline/" + name
			var line string
			testenv.WaitFor(t, 3*time.Minute, "the instance's output to say "+tc.wantLog, func() bool {
				line = workerOutputLine(fqfn, tc.wantLog)
				return line != ""
			})
			t.Logf("the instance says: %s", line)
			status, err := admin.Functions().GetFunctionStatus(a.tenant, "pipeline", name)
			if err != nil {
				t.Fatal(err)
			}
			for _, inst := range status.Instances {
				if inst.Status.Running && inst.Status.NumReceived > 0 {
					t.Errorf("instance %d running and received %d messages of B's ledger", inst.InstanceID, inst.Status.NumReceived)
				}
			}
			t.Logf("status: %d of %d running, instance errors %v", status.NumRunning, status.NumInstances, instanceErrors(status))
			stats, ok, err := pulsarx.Subscription(t.Context(), mustClients(t, svc), ledgerB, a.tenant+"/pipeline/"+name)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				t.Errorf("a subscription %s exists on B's ledger: %+v", a.tenant+"/pipeline/"+name, stats)
			}
			if n := topicEntries(t, svc, out); n > 0 {
				t.Errorf("the function's output %s holds %d entries taken from B's ledger", out, n)
			}
		})
	}

	t.Run("A's Cassandra role reads A's keyspace and nothing of B's", func(t *testing.T) {
		session := cassandraSession(t, asA)
		if err := session.Query(`SELECT * FROM "` + a.keyspace + `".user_activity_v1 LIMIT 1`).Exec(); err != nil {
			t.Fatalf("A reading its own keyspace: %v", err)
		}
		for _, q := range []string{
			`SELECT * FROM "` + b.keyspace + `".user_activity_v1 LIMIT 1`,
			`INSERT INTO "` + b.keyspace + `".foldline_views (view_name, table_name) VALUES ('x', 'y')`,
			`DROP KEYSPACE "` + b.keyspace + `"`,
			`CREATE KEYSPACE intruder WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
			`GRANT ALL PERMISSIONS ON KEYSPACE "` + b.keyspace + `" TO "` + idA.Role + `"`,
			`ALTER ROLE "` + tenantid.RoleFor(b.tenant) + `" WITH PASSWORD = 'mine'`,
		} {
			err := session.Query(q).Exec()
			var reqErr gocql.RequestError
			if !errors.As(err, &reqErr) || reqErr.Code() != gocql.ErrCodeUnauthorized {
				t.Errorf("%s as %s: error %v, want Unauthorized", q, idA.Role, err)
			}
		}
	})
}

// requireDenied fails unless err is Pulsar's 401 or 403.
func requireDenied(t *testing.T, what string, err error) {
	t.Helper()
	if code := pulsarx.StatusCode(err); code != 401 && code != 403 {
		t.Errorf("%s: error %v (HTTP %d), want 401 or 403", what, err, code)
	}
}

// buildExclaim builds the exclaim example (a plain Go function on our
// runtime) into the test cache.
func buildExclaim(t *testing.T, s *shop) string {
	t.Helper()
	builder := &gobuild.Builder{Dir: testenv.RepoRoot(), CacheDir: s.opts.CacheDir}
	bin, err := builder.Build(t.Context(), "github.com/foldline/foldline/functions/examples/exclaim")
	if err != nil {
		t.Fatal(err)
	}
	return bin.Path
}

// workerOutputLine returns the first line of the standalone's output that
// names function fqfn and says want ("" when none does): the process
// runtime passes a Go instance's standard error on to the worker's.
func workerOutputLine(fqfn, want string) string {
	raw, _ := os.ReadFile(filepath.Join(services.StackDir(), "pulsar", "logs", "pulsar.out"))
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, fqfn) && strings.Contains(line, want) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func instanceErrors(status utils.FunctionStatus) []string {
	var errs []string
	for _, inst := range status.Instances {
		if inst.Status.Err != "" {
			errs = append(errs, inst.Status.Err)
		}
	}
	return errs
}

func mustClients(t *testing.T, svc services.Services) *pulsarx.Clients {
	t.Helper()
	c, err := pulsarx.Connect(svc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// topicEntries counts the entries of a topic as the superuser sees it (0
// when it does not exist).
func topicEntries(t *testing.T, svc services.Services, topic string) int64 {
	t.Helper()
	n, err := pulsarx.Entries(t.Context(), mustClients(t, svc), topic)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
