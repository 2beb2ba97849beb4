// Package targetversion names the Apache Pulsar and Apache Cassandra
// releases Foldline targets: the ones its runtime's protocol and the tests
// are checked against, and the ones scripts/lib.sh fetches for the local
// stack. A test keeps the constants and the script in step, so that
// foldline version never names a release the stack does not run.
package targetversion

const (
	// Pulsar is the Apache Pulsar release (broker, functions worker,
	// pulsar-admin) whose functions protocol functions/pf speaks.
	Pulsar = "4.0.8"
	// Cassandra is the Apache Cassandra release the sink and the view
	// registry are tested against.
	Cassandra = "5.0.9"
)
