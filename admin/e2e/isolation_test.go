package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/gocql/gocql"

	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/tenantid"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/internal/testenv"
	"github.com/foldline/foldline/sinks/cassandra"
)

// TestTenantIsolation deploys the shop pipeline as two tenants, A and B, on
// the stack with authentication (scripts/stack's default) and checks, with
// the credentials deploy gave A, that A reaches nothing of B: not B's
// topics (produce, consume, list), not B's functions, not B's keyspace, and
// that a function created by hand in A on B's ledger gets nothing. B's own
// pipeline meanwhile runs as B (its functions with B's token, its sinks
// with B's Cassandra role) and folds B's events. A cannot poison B's views
// either (no producing to B's pipeline and view-operation topics), a
// function A creates itself in A on B's pipeline topic gets nothing, and
// clients without credentials reach nothing of B.
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
	idA := tenantid.Derive(key, a.tenant, 0)
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

	t.Run("B's deployed functions carry B's credentials, not the superuser's", func(t *testing.T) {
		names := slices.Clone(cassandraBound)
		for _, sink := range sinks {
			names = append(names, sink.name)
		}
		requireRunsAs(t, svc, key, b.tenant, names)
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

	// B's pipeline topics, as the shop's pipeline.yaml and views/
	// name them under B: a producer on one of them poisons B's views
	// without touching B's ledger.
	validB := "persistent://" + b.tenant + "/pipeline/valid"
	opsB := []string{"persistent://" + b.tenant + "/pipeline/user-activity-ops", "persistent://" + b.tenant + "/pipeline/product-sales-ops"}
	t.Run("A cannot produce to B's pipeline and view-operation topics", func(t *testing.T) {
		for _, topic := range append([]string{validB}, opsB...) {
			requireTopicExists(t, svc, topic)
			requireProduceRefused(t, clientA, topic, "AuthorizationError")
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
		// credentials and stays up, not running, saying why.
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

	// The same, created by A itself with A's own token (through the
	// functions API, as A's foldline or pulsar-admin would) on B's valid
	// topic: the worker accepts it (A administers its namespace, and the
	// worker does not check the inputs), so the instance must get nothing.
	t.Run("a function A creates in A on B's pipeline topic gets nothing", func(t *testing.T) {
		name := "steal-by-a"
		fqfn := a.tenant + "/pipeline/" + name
		out := "persistent://" + a.tenant + "/pipeline/" + name
		requireTopicExists(t, svc, validB)
		before := subscriptions(t, svc, validB)
		conf := &utils.FunctionConfig{Tenant: a.tenant, Namespace: "pipeline", Name: name, Runtime: utils.GoRuntime,
			Inputs: []string{validB}, Output: out, SubscriptionPosition: "Earliest",
			Secrets: map[string]any{"token": idA.PulsarToken}}
		v3 := asA.PulsarAdminConfig()
		v3.PulsarAPIVersion = config.V3
		fnA, err := pulsaradmin.NewClient(v3)
		if err != nil {
			t.Fatal(err)
		}
		if err := fnA.Functions().CreateFunc(conf, bin); err != nil {
			requireDenied(t, "A creating a function in A on B's topic", err)
			t.Logf("refused at create time: %v", err)
			return
		}
		admin := a.pulsarAdmin(t)
		t.Cleanup(func() { _ = admin.Functions().DeleteFunction(a.tenant, "pipeline", name) })
		var line string
		testenv.WaitFor(t, 3*time.Minute, "the instance's output to say AuthorizationError", func() bool {
			line = workerOutputLine(fqfn, "AuthorizationError")
			return line != ""
		})
		t.Logf("created; the instance says: %s", line)
		staysFalse(t, 30*time.Second, "the function reaching B's topic", func() (bool, string) {
			if extra := newKeys(subscriptions(t, svc, validB), before); len(extra) > 0 {
				return true, fmt.Sprintf("new subscriptions on %s: %v", validB, extra)
			}
			if n := topicEntries(t, svc, out); n > 0 {
				return true, fmt.Sprintf("the function's output %s holds %d entries", out, n)
			}
			status, err := admin.Functions().GetFunctionStatus(a.tenant, "pipeline", name)
			if pulsarx.StatusCode(err) == http.StatusInternalServerError && strings.Contains(err.Error(), "Not alive") {
				// The worker reached no instance (one starting, or
				// restarted). The checks above still hold.
				return false, ""
			}
			if err != nil {
				return true, fmt.Sprintf("reading the function's status: %v", err)
			}
			for _, inst := range status.Instances {
				if inst.Status.NumReceived > 0 {
					return true, fmt.Sprintf("instance %d received %d messages", inst.InstanceID, inst.Status.NumReceived)
				}
			}
			return false, ""
		})
	})

	t.Run("anonymous clients reach nothing of B", func(t *testing.T) {
		// The Go client answers a refused handshake with a bare "connection
		// error" once its retries run out; the broker's reason is in its log.
		var clientLog lockedBuffer
		anon, err := pulsar.NewClient(pulsar.ClientOptions{URL: svc.PulsarURL, OperationTimeout: 5 * time.Second,
			Logger: log.NewLoggerWithSlog(slog.New(slog.NewTextHandler(&clientLog, nil)))})
		if err != nil {
			t.Fatal(err)
		}
		defer anon.Close()
		requireProduceRefused(t, anon, ledgerB, "connection error")
		const refused = "Failed to establish connection with broker: 'Failed to authenticate'"
		if !strings.Contains(clientLog.String(), refused) {
			t.Errorf("the anonymous client's log does not say %q:\n%s", refused, clientLog.String())
		}

		anonAdmin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: svc.PulsarAdminURL})
		if err != nil {
			t.Fatal(err)
		}
		nsB, _ := utils.GetNamespaceName(b.tenant + "/ledger")
		_, _, err = anonAdmin.Topics().List(*nsB)
		if code := pulsarx.StatusCode(err); code != 401 {
			t.Errorf("listing B's topics without a token: error %v (HTTP %d), want 401", err, code)
		}

		idB := tenantid.Derive(key, b.tenant, 0)
		asB := services.Services{CassandraHost: svc.CassandraHost, CassandraUser: idB.Role, CassandraPassword: idB.CassandraPassword}
		cassandraSession(t, asB) // B's role logs in with its own password
		requireCassandraRefused(t, "no credentials", services.Services{CassandraHost: svc.CassandraHost}, b.keyspace, "authentication required")
		asB.CassandraPassword = "wrong-" + idB.CassandraPassword
		requireCassandraRefused(t, "B's role with a wrong password", asB, b.keyspace, "password are incorrect")
		asB.CassandraUser = svc.CassandraUser
		requireCassandraRefused(t, "the superuser with a wrong password", asB, b.keyspace, "password are incorrect")
	})

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
			`ALTER ROLE "` + tenantid.RoleFor(b.tenant, 0) + `" WITH PASSWORD = 'mine'`,
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

// requireRunsAs fails unless every function of tenant's pipeline namespace
// (read as the superuser, secrets included) carries in its secrets a token
// whose subject is the tenant's role, never the superuser's, and unless
// exactly the functions that use Cassandra (the sinks and the stateful
// stages: their names in users, which must be deployed) carry the tenant's
// Cassandra login, never the superuser's.
func requireRunsAs(t *testing.T, svc services.Services, key []byte, tenant string, users []string) {
	t.Helper()
	id := tenantid.Derive(key, tenant, 0)
	superToken, err := svc.PulsarTokenValue()
	if err != nil {
		t.Fatal(err)
	}
	superRole, err := jwtSubject(superToken)
	if err != nil {
		t.Fatalf("the superuser's token: %v", err)
	}
	superUser, superPassword, err := svc.CassandraCredentials()
	if err != nil {
		t.Fatal(err)
	}
	fns := mustClients(t, svc).Functions
	names, err := fns.GetFunctions(tenant, "pipeline")
	if err != nil {
		t.Fatalf("listing the functions of %s: %v", tenant, err)
	}
	for _, user := range users {
		if !slices.Contains(names, user) {
			t.Fatalf("function %s is not among the deployed functions %v", user, names)
		}
	}
	if len(names) <= len(users) {
		t.Fatalf("deployed functions %v: no function besides those that use Cassandra", names)
	}
	for _, name := range names {
		conf, err := fns.GetFunction(tenant, "pipeline", name)
		if err != nil {
			t.Fatalf("reading function %s/pipeline/%s: %v", tenant, name, err)
		}
		token, _ := conf.Secrets["token"].(string)
		sub, err := jwtSubject(token)
		switch {
		case err != nil:
			t.Errorf("function %s: secret token: %v (secrets hold %v)", name, err, slices.Sorted(maps.Keys(conf.Secrets)))
		case sub == superRole:
			t.Errorf("function %s runs with the superuser's token (subject %q)", name, sub)
		case sub != id.Role:
			t.Errorf("function %s's token has subject %q, want %q", name, sub, id.Role)
		}
		user, _ := conf.Secrets[cassandra.SecretUsername].(string)
		password, _ := conf.Secrets[cassandra.SecretPassword].(string)
		switch {
		case !slices.Contains(users, name):
			if user != "" || password != "" {
				t.Errorf("function %s, which does not use Cassandra, carries a Cassandra login (%q)", name, user)
			}
		case user == superUser || password == superPassword:
			t.Errorf("function %s logs in to Cassandra as the superuser (%q)", name, user)
		case user != id.Role || password != id.CassandraPassword:
			t.Errorf("function %s logs in to Cassandra as %q (password matches: %v), want %q with its password", name, user, password == id.CassandraPassword, id.Role)
		}
		t.Logf("%s: token subject %q, Cassandra user %q", name, sub, user)
	}
}

// jwtSubject returns the subject of a JWT (its signature not verified).
func jwtSubject(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("decoding the JWT's claims: %w", err)
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", fmt.Errorf("decoding the JWT's claims: %w", err)
	}
	if claims.Sub == "" {
		return "", errors.New("the JWT has no subject")
	}
	return claims.Sub, nil
}

// requireTopicExists fails unless the superuser sees topic, so that a
// refusal to others cannot be the broker's answer for a missing topic.
func requireTopicExists(t *testing.T, svc services.Services, topic string) {
	t.Helper()
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustClients(t, svc).Admin.Topics().GetStats(*tn); err != nil {
		t.Fatalf("topic %s, as the superuser: %v", topic, err)
	}
}

// requireProduceRefused fails unless client can neither create a producer
// on topic nor send to it, refused with an error that names want (the
// broker's AuthorizationError or AuthenticationError).
func requireProduceRefused(t *testing.T, client pulsar.Client, topic, want string) {
	t.Helper()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err == nil {
		defer producer.Close()
		_, err = producer.Send(t.Context(), &pulsar.ProducerMessage{Key: "poison", Payload: []byte(`{"poison":true}`)})
		if err == nil {
			t.Errorf("sent a message to %s", topic)
			return
		}
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("producing to %s: error %v, want %s", topic, err, want)
		return
	}
	t.Logf("producing to %s refused as expected: %v", topic, err)
}

// subscriptions returns the names of topic's subscriptions, as the
// superuser sees them.
func subscriptions(t *testing.T, svc services.Services, topic string) []string {
	t.Helper()
	tn, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := mustClients(t, svc).Admin.Topics().GetStats(*tn)
	if err != nil {
		t.Fatalf("reading stats of %s: %v", topic, err)
	}
	return slices.Sorted(maps.Keys(stats.Subscriptions))
}

// newKeys returns the names in got that are not in before.
func newKeys(got, before []string) []string {
	var extra []string
	for _, k := range got {
		if !slices.Contains(before, k) {
			extra = append(extra, k)
		}
	}
	return extra
}

// staysFalse polls cond until d has passed and fails as soon as it holds,
// with what and cond's description of what it saw.
func staysFalse(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, why := cond(); ok {
			t.Fatalf("%s: %s", what, why)
		}
		time.Sleep(time.Second)
	}
}

// requireCassandraRefused fails unless Cassandra refuses a session with
// svc's credentials with an error that says want, or, should it log in,
// refuses reading keyspace.
func requireCassandraRefused(t *testing.T, what string, svc services.Services, keyspace, want string) {
	t.Helper()
	cluster, err := svc.CassandraCluster()
	if err != nil {
		t.Fatal(err)
	}
	cluster.Timeout = 30 * time.Second
	session, err := cluster.CreateSession()
	if err == nil {
		defer session.Close()
		err = session.Query(`SELECT * FROM "` + keyspace + `".user_activity_v1 LIMIT 1`).Exec()
		t.Errorf("%s: logged in to Cassandra (reading %s: %v)", what, keyspace, err)
		return
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one that says %q", what, err, want)
		return
	}
	t.Logf("%s: refused as expected: %v", what, err)
}

// lockedBuffer is a bytes.Buffer that a client's goroutines may write
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
