// Package manifest reads a manifest directory — the tenant (namespaces and
// their policies, ledger topics, keyspace), the pipelines (functions, each
// a Pulsar function config file plus the Go package of its binary) and the
// views (table definition, merge rules, sink) — and checks it as a whole.
// A view may also be declared straight from the events (a from section and
// aggregates, see declared.go): the loader then adds the function that
// folds them, and checks the fields it names against a sample of events.
//
// Every problem carries the file, line and field it is about, and Load
// returns all of them at once, so that `foldline lint` can report them the
// way compilers do. Function config files stay in Pulsar's own format
// (FunctionConfig, as `pulsar-admin functions create --function-config-file`
// reads it) so the same file works with stock tools; Foldline's additions
// (the binary to build, views, sinks) live in its own documents, told apart
// by their kind.
//
// The DAG (Graph) links stages through topics: a stage reads the topics
// other stages write, or the ledger topics that ingest writes. Deploy walks
// it upstream first; status walks it to show each stage's backlog.
package manifest
