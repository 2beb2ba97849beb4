package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/foldline/foldline/sinks/cassandra"
)

// A view's sink reads each row's applied positions before it writes the
// row, at one consistency level for both (sink.userConfig.consistency,
// default LOCAL_QUORUM). The effect is exactly-once only when every read
// meets every earlier write on at least one replica: twice the replicas the
// level waits for must exceed the row's replicas. A level that does not
// (ONE with replication factor 2) lets a read miss a write that reached
// only the other replica, and the sink then applies an operation twice; a
// level that waits for more replicas than the keyspace has never
// succeeds. checkReplicaOverlap refuses both, for the tenant keyspace's
// replication. A level that overlaps stalls while too few replicas are up
// and catches up afterwards, which is the safe way to fail.

// replicaLayout is a keyspace's replication as the consistency rules see
// it: the replicas of a row in each data centre.
type replicaLayout struct {
	// perDC holds each data centre's replication factor (SimpleStrategy:
	// one entry, "").
	perDC map[string]int
}

func (l replicaLayout) total() int {
	n := 0
	for _, rf := range l.perDC {
		n += rf
	}
	return n
}

// parseReplication reads the replicas of a keyspace's replication map; ok
// is false for a strategy whose replicas it cannot count (LocalStrategy, a
// custom class), which the check then leaves alone.
func parseReplication(r cassandra.Replication) (l replicaLayout, ok bool, err error) {
	class := strings.TrimPrefix(r["class"], "org.apache.cassandra.locator.")
	l.perDC = map[string]int{}
	switch class {
	case "SimpleStrategy":
		rf, err := replicationFactor("replication_factor", r["replication_factor"])
		if err != nil {
			return l, false, err
		}
		l.perDC[""] = rf
		return l, true, nil
	case "NetworkTopologyStrategy":
		for _, dc := range slices.Sorted(maps.Keys(r)) {
			if dc == "class" || dc == "replication_factor" {
				// replication_factor alone is a default for every data centre,
				// whose number only the cluster knows.
				continue
			}
			rf, err := replicationFactor(dc, r[dc])
			if err != nil {
				return l, false, err
			}
			l.perDC[dc] = rf
		}
		return l, len(l.perDC) > 0, nil
	}
	return l, false, nil
}

// replicationFactor reads one replication factor; Cassandra also takes
// "3/1" (three replicas, one of them transient), whose full replicas are
// what reads and writes can count on.
func replicationFactor(key, text string) (int, error) {
	full, _, _ := strings.Cut(text, "/")
	rf, err := strconv.Atoi(strings.TrimSpace(full))
	if err != nil || rf < 1 {
		return 0, fmt.Errorf("%s %q: want a whole number of replicas, 1 or more", key, text)
	}
	return rf, nil
}

// waitsFor is how many replicas a read or write at level waits for, and
// whether it counts them in one data centre only (LOCAL_*); known is false
// for a level the sink cannot use for both reads and writes.
func (l replicaLayout) waitsFor(level string) (n int, local, known bool) {
	total := l.total()
	switch level {
	case "ONE", "LOCAL_ONE":
		return 1, level == "LOCAL_ONE", true
	case "TWO":
		return 2, false, true
	case "THREE":
		return 3, false, true
	case "QUORUM":
		return total/2 + 1, false, true
	case "LOCAL_QUORUM":
		// Per data centre; with one data centre it is QUORUM.
		return l.minDC()/2 + 1, true, true
	case "EACH_QUORUM":
		return total/2 + 1, false, true // a quorum of each data centre is at least a quorum of all
	case "ALL":
		return total, false, true
	}
	return 0, false, false
}

// minDC is the smallest data centre's replication factor.
func (l replicaLayout) minDC() int {
	m := 0
	for _, rf := range l.perDC {
		if m == 0 || rf < m {
			m = rf
		}
	}
	return m
}

// checkReplicaOverlap checks every view's sink consistency against the
// tenant keyspace's replication, and that the sink checks the keyspace
// with that replication.
func (s *Set) checkReplicaOverlap() Problems {
	if s.Tenant == nil || s.Tenant.Replication.Validate() != nil {
		return nil
	}
	var ps Problems
	layout, counted, err := parseReplication(s.Tenant.Replication)
	if err != nil {
		return Problems{s.Tenant.Problem("replication", "%v", err)}
	}
	for _, v := range s.Views {
		settings, err := cassandra.ParseSettings(v.Sink.UserConfig)
		if err != nil {
			continue // checkView reports it
		}
		ps = append(ps, s.checkSinkReplication(v, settings.Replication)...)
		if !counted {
			continue
		}
		field := "sink.userConfig.consistency"
		level := strings.ToUpper(settings.Consistency)
		named := level
		if _, set := v.Sink.UserConfig["consistency"]; !set {
			named += " (the sink's default)"
		}
		if msg := layout.overlapProblem(level, s.Tenant.Keyspace); msg != "" {
			ps = append(ps, v.Problem(field, "%s: %s", named, msg))
		}
	}
	return ps
}

// overlapProblem says why reads and writes at level may not meet on the
// keyspace, or "" when they always do.
func (l replicaLayout) overlapProblem(level, keyspace string) string {
	total := l.total()
	n, local, known := l.waitsFor(level)
	switch {
	case !known:
		return "the sink reads and writes at this level, and Cassandra takes it for writes only: want QUORUM, LOCAL_QUORUM or ALL"
	case local && len(l.perDC) > 1:
		return fmt.Sprintf("keyspace %s has replicas in %d data centres and the sink's reads and writes may be served by different ones, which a LOCAL level does not make meet: want QUORUM, EACH_QUORUM or ALL",
			keyspace, len(l.perDC))
	case n > total:
		return fmt.Sprintf("waits for %d replicas, and keyspace %s has %d: no read or write would ever succeed; want QUORUM, LOCAL_QUORUM or ALL", n, keyspace, total)
	case 2*n <= total:
		return fmt.Sprintf("reads and writes wait for %d of keyspace %s's %d replicas each, so a read can miss a write that reached only the others, and the sink would then apply an operation twice or lose one; want QUORUM, LOCAL_QUORUM or ALL (2 × replicas waited for > %d)",
			n, keyspace, total, total)
	}
	return ""
}

// checkSinkReplication checks a replication a view's sink sets itself
// against the tenant's: the sink refuses a keyspace whose replication
// differs from the one it checks with. A sink that sets none gets the
// tenant's from deploy.
func (s *Set) checkSinkReplication(v *View, sink cassandra.Replication) Problems {
	if _, set := v.Sink.UserConfig["replication"]; !set {
		return nil
	}
	want := s.Tenant.Replication
	if sameReplication(sink, want) {
		return nil
	}
	return Problems{v.Problem("sink.userConfig.replication", "the sink checks keyspace %s with %v, and refuses it as created with the tenant's, %v (%s): remove the key (deploy gives the sink the tenant's)",
		s.Tenant.Keyspace, map[string]string(sink), map[string]string(want), s.Tenant.File)}
}

// sameReplication compares two replication maps as Cassandra keeps them.
func sameReplication(a, b cassandra.Replication) bool {
	norm := func(r cassandra.Replication) map[string]string {
		out := map[string]string{}
		for k, v := range r {
			if k == "class" {
				v = strings.TrimPrefix(v, "org.apache.cassandra.locator.")
			}
			out[k] = strings.TrimSpace(v)
		}
		return out
	}
	return maps.Equal(norm(a), norm(b))
}
