package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/status"
	"github.com/foldline/foldline/internal/testenv"
)

// The two-node Cassandra cluster of scripts/cassandra-cluster, beside the
// stack's one node (which stays a cluster of one: other tests' keyspaces
// have replication factor 1).
const (
	clusterScript = "scripts/cassandra-cluster"
	clusterHosts  = "127.0.0.2:9042,127.0.0.3:9042"
)

// cassandraCluster runs scripts/cassandra-cluster with args.
func cassandraCluster(t testing.TB, args ...string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), clusterScript), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", clusterScript, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s (%.0fs):\n%s", clusterScript, strings.Join(args, " "), time.Since(start).Seconds(), strings.TrimSpace(string(out)))
}

// useCassandraCluster points the test's services — the admin side and the
// deployed sinks — at the two-node cluster. Outside CI a cluster that is not
// up skips the test with the command that starts it; under CI the test
// starts it (scripts/test does so first, so this is a no-op there).
func useCassandraCluster(t *testing.T) {
	t.Helper()
	testenv.Pulsar(t)
	status := exec.Command(filepath.Join(testenv.RepoRoot(), clusterScript), "status")
	if out, err := status.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("the two-node Cassandra cluster is not up (start it with %s up, after scripts/stack up):\n%s", clusterScript, out)
		}
		cassandraCluster(t, "up")
	}
	t.Setenv("FOLDLINE_CASSANDRA", clusterHosts)
	t.Setenv("FOLDLINE_CASSANDRA_SINK_HOSTS", clusterHosts)
}

// TestMultiNodeViewsSurviveANodeRestart deploys the shop manifests to a
// tenant whose keyspace has replication factor 2 on the two-node cluster,
// and takes each node away while events flow: node b is killed (kill -9)
// while the sinks apply a first part of the events, more events arrive while
// it is down, then it starts again; node a, the seed, is stopped cleanly the
// same way. With replication factor 2 LOCAL_QUORUM is both replicas, so the
// sinks and the stateful stages (dedup first) stall while a node is down and
// catch up once it is back
// (issue 15: multi-node); the views end equal to the fold of the ledger,
// with no operation skipped or applied twice.
func TestMultiNodeViewsSurviveANodeRestart(t *testing.T) {
	useCassandraCluster(t)
	dir := testenv.ShopManifests(t)
	// Deploy gives the sinks the tenant's replication to check the
	// keyspace with.
	editFile(t, filepath.Join(dir, "tenant.yaml"), `replication_factor: "1"`, `replication_factor: "2"`)
	s := deployShopFrom(t, "multinode", dir)
	if s.svc.CassandraHost != clusterHosts || s.svc.SinkHosts() != clusterHosts {
		t.Fatalf("the services are %s, want Cassandra at %s", s.svc.Describe(), clusterHosts)
	}
	var replication map[string]string
	if err := s.session.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, s.keyspace).Scan(&replication); err != nil {
		t.Fatalf("reading the replication of keyspace %s: %v", s.keyspace, err)
	}
	if replication["replication_factor"] != "2" {
		t.Fatalf("keyspace %s has replication %v, want replication factor 2", s.keyspace, replication)
	}

	events := generate(t, 9000, 15)
	for i, fault := range []struct{ how, node string }{{"kill", "b"}, {"down", "a"}} {
		part := events[i*4000 : i*4000+2000]
		s.ingest(t, part)
		cassandraCluster(t, fault.how, fault.node)
		s.ingest(t, events[i*4000+2000:(i+1)*4000])
		s.checkSinksStalled(t)
		cassandraCluster(t, "up", fault.node)
		t.Logf("node %s back after %s, with %d events in the ledger", fault.node, fault.how, len(s.ledger))
	}
	s.ingest(t, events[8000:])
	s.waitForFold(t, 5*time.Minute)
	report, err := status.Get(t.Context(), status.Options{Command: target.Command{Dir: s.opts.Dir, Target: s.opts.Target, Services: s.svc}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range report.Stages {
		if st.SinkTotals != nil {
			t.Logf("%s: %d operations applied, %d skipped as applied before", st.Name, st.SinkTotals.Applied, st.SinkTotals.Skipped)
		}
	}
}

// cassandraBound are the shop's stages that read or write Cassandra besides
// the sinks: the stateful transformations, whose keyed state lives in the
// tenant's keyspace (dedup reads the ledger first, so every event waits for
// it).
var cassandraBound = []string{"dedup", "sku-refunds", "enrich-purchases"}

// checkSinksStalled waits until the stateless transformations, which need
// no Cassandra, have passed on every event they were given, and checks that
// the stages that need Cassandra hold what they have not stored: with a
// node down their reads and writes cannot reach both replicas, so dedup,
// first on the ledger, must keep the events ingested meanwhile unacknowledged
// (none reaches the views' paths), and it must still hold them a while later
// rather than acknowledge an event whose state it could not save.
func (s *shop) checkSinksStalled(t *testing.T) {
	t.Helper()
	admin := s.pulsarAdmin(t)
	backlogs := func() (stateless, bound map[string]int64) {
		stateless, bound = map[string]int64{}, map[string]int64{}
		for _, ns := range []string{"ledger", pipelineNS} {
			name, err := utils.GetNameSpaceName(s.tenant, ns)
			if err != nil {
				t.Fatal(err)
			}
			_, topics, err := admin.Topics().List(*name)
			if err != nil {
				t.Fatalf("listing the topics of %s: %v", name, err)
			}
			for _, topic := range topics {
				tn, err := utils.GetTopicName(topic)
				if err != nil {
					t.Fatal(err)
				}
				stats, err := admin.Topics().GetStats(*tn)
				if err != nil {
					t.Fatalf("reading the stats of %s: %v", topic, err)
				}
				for sub, st := range stats.Subscriptions {
					// Every sink waits for Cassandra, the declared views' too
					// (not in sinks), and so do the stateful stages.
					if strings.HasSuffix(sub, "-sink") || slices.Contains(cassandraBound, sub) ||
						slices.ContainsFunc(sinks, func(k struct{ name, input string }) bool { return k.name == sub }) {
						bound[sub] += st.MsgBacklog
					} else {
						stateless[tn.GetLocalName()+" "+sub] += st.MsgBacklog
					}
				}
			}
		}
		return stateless, bound
	}
	var bound map[string]int64
	testenv.WaitFor(t, 3*time.Minute, "the stateless transformations to pass on every event they were given", func() bool {
		var stateless map[string]int64
		stateless, bound = backlogs()
		for _, n := range stateless {
			if n > 0 {
				return false
			}
		}
		return len(stateless) > 0
	})
	held := bound[cassandraBound[0]]
	if held == 0 {
		t.Fatalf("%s acknowledged every event of the ledger while a Cassandra node was down: its state writes at LOCAL_QUORUM cannot have reached both replicas (backlogs %v)", cassandraBound[0], bound)
	}
	time.Sleep(10 * time.Second)
	if _, later := backlogs(); later[cassandraBound[0]] < held {
		t.Errorf("%s acknowledged events while a Cassandra node was down (backlog %d, then %d)", cassandraBound[0], held, later[cassandraBound[0]])
	}
	t.Logf("with a node down, the stages that need Cassandra hold back %v operations", bound)
}
