// Package e2e holds the end-to-end tests of Foldline: the shop manifests (the
// frozen copy in internal/testenv/testdata, so that a view added to
// manifests/ changes no expectation here) deployed into a tenant of their own on the real Pulsar and Cassandra, a
// generated stream ingested into the ledger, and every view compared with an
// independent fold of the same events (internal/shopfold) — in quiet
// conditions and under faults (sink instances killed, operations delivered
// twice, topics unloaded while events flow, Cassandra restarted) and through backfills (a view added after the
// events, a replay, a changed transformation under live traffic). It has no
// code outside its tests; testdata holds a changed transformation they
// deploy.
package e2e
