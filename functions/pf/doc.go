// Package pf is Foldline's Go runtime for Pulsar Functions. A binary whose
// main calls pf.Start(handler) is deployed with the stock
//
//	pulsar-admin functions create --go <binary> ...
//
// and runs under the Pulsar functions worker like an upstream Go function: it
// reads the worker's -instance-conf, consumes the input topics, calls the
// handler per message, produces to the output topic, and answers the
// worker's proto.InstanceControl gRPC calls on "port" (functions status,
// functions stats) and Prometheus scrapes on "metricsPort". The API follows
// upstream pulsar-function-go's pf (Start, FromContext, the handler shapes)
// so the two can be swapped.
//
// Beyond upstream:
//
//   - Output keeps the input's key, properties and event time, and carries
//     the origin position of the ledger event that caused it, as two
//     properties (envelope.PropOriginTopic, PropOriginPosition) or, with user
//     config originProperty "single", as one (envelope.PropOrigin); every
//     reader takes both forms. A message without origin properties
//     is a ledger event: its origin is its own topic (partition) and message
//     id. A handler of shape func(context.Context, []byte) ([]Record, error)
//     emits zero, one or many records and may set topic, key, properties and
//     event time per record; FunctionContext.Publish adds records too. A
//     record without topic goes to the output topic; when the function has
//     none it is dropped, as upstream drops output then.
//   - InputOf and Defer give a handler its message, origin and deferral
//     without its FunctionContext; under the worker the runtime then reuses
//     the input's state for a later input once it is over.
//   - AfterSent lets a handler settle an input between the confirmation of
//     all its outputs and its acknowledgement (a stateful transformation
//     saves the state change the input caused there: package keyed), and
//     RunsLocally tells a handler whether it runs locally. SetExporter gives
//     a local run's driver what the instance holds once the input has ended
//     (the keyed states a fused backfill hands to the copy it deploys): an
//     input with PropExportStates is not handed to the handler. An input
//     with PropImportStates hands the states to start from to the handler
//     of the function it names (ImportedStates, TakesImport).
//   - With LocalFlag before -instance-conf the binary runs without a broker
//     on localwire frames (standard input and output): Foldline's verify,
//     training sets and fused backfills drive a view's path this way.
//     StartChain runs several handlers as one local chain in one process,
//     each handing what it sends to its output topic to the next in memory.
//   - A handler error (or panic) never stops the instance. The runtime calls
//     the handler again for the same message, in place, after a backoff, up
//     to maxRetries times; then it publishes the message to the dead-letter
//     topic with properties envelope.PropDeadLetterReason (the error text),
//     PropDeadLetterSource (input topic), PropDeadLetterFunction
//     (tenant/namespace/name), PropDeadLetterAttempts and the origin, and
//     acknowledges it. An error wrapped with Permanent skips the retries, and
//     so does an input whose origin properties are malformed.
//   - Retries happen in place, not by negative acknowledgement, because a
//     redelivered message would come back after messages behind it: the next
//     message is taken only once the current one has succeeded or been
//     dead-lettered. With a failover (or key_shared) subscription this keeps
//     the order per input partition (per key) end to end; the price is that a
//     failing message holds up its instance for the sum of its backoffs.
//     Outputs and acknowledgements are asynchronous and pipelined: sends to
//     one topic keep their order, and under ATLEAST_ONCE an input is
//     acknowledged only after all its outputs are confirmed. A failed send
//     negatively acknowledges the input (a sink exception).
//   - Records published during a failed invocation are discarded, so a retry
//     does not duplicate them.
//
// Processing guarantees: ATLEAST_ONCE (default) as above; ATMOST_ONCE
// acknowledges on receipt; MANUAL (or auto-ack off) leaves acknowledgement to
// the handler through FunctionContext.Ack, except for dead letters, which the
// runtime always acknowledges. EFFECTIVELY_ONCE is refused by the worker for
// Go and by this runtime.
//
// # User config keys read by the runtime
//
// The worker refuses --max-message-retries and dead-letter settings for Go
// functions, so they come from --user-config:
//
//   - "deadLetterTopic" (string): where failed messages go. Default
//     persistent://<tenant>/<namespace>/<function name>-DLQ, one per
//     function whatever the inputs, so that regex inputs need no extra
//     topics.
//   - "maxRetries" (whole number, the worker passes it as a double such as
//     3.0): retries after the first attempt. Default 3; 0 dead-letters on the
//     first error.
//   - "retryBackoffMs" (whole number): wait before the first retry, doubled
//     for each further retry, at most 30 s. Default 500.
//   - "subscriptionType" ("key_shared", "failover" or "shared"): overrides the
//     subscription type from the function details. The worker refuses
//     --retain-key-ordering for Go functions; "key_shared" lets the runtime
//     take a Key_Shared subscription itself, so that several instances share
//     a non-partitioned topic with order per key.
//   - "untilPublishTime" (RFC 3339) and "untilPosition" (ledger:entry:batch):
//     a cutoff for a replay as of a point (foldline backfill --until). A
//     ledger event (an input without origin) published after the time, or
//     positioned after the position, is acknowledged and counted as
//     processed without reaching the handler; derived inputs are never
//     skipped.
//   - "ledgerEpochs" (map of full topic name to epoch): the epoch of each
//     ledger topic the stage reads, which foldline deploy sets from the
//     topic's properties. A ledger event without a foldline.ledger.epoch
//     property of its own (one published by a producer other than foldline
//     ingest) gets its topic's, so that the sink can tell a re-created
//     topic's restarted positions from redeliveries.
//   - "gcPercent" (whole number) and "memoryLimitMB" (whole number, 0 for
//     none): the Go garbage collector's target percentage and soft memory
//     limit. Defaults 400 and 160: an instance's live heap is small, and
//     collecting less often saves CPU on every message (see gc.go). A
//     handler that keeps a large live heap wants a higher limit (foldline
//     deploy gives its Cassandra sink 512). GOGC and GOMEMLIMIT in the
//     process environment win over both.
//   - "maxProcs" (whole number): the instance's GOMAXPROCS; 0, the
//     default, keeps Go's (one per core). 1 saves CPU on shared cores at a
//     cost in latency (see tuneRuntime). GOMAXPROCS in the environment wins.
//   - "cpuProfile" (a file name): the instance writes a pprof CPU profile
//     of its run there, complete once it has shut down (see
//     UserConfigCPUProfile).
//   - "foldline.fingerprint" (a hex digest, set by foldline deploy): the
//     instance reports its first 52 bits as the user metric of that name,
//     by which deploy tells an updated instance from the one before (see
//     UserConfigFingerprint).
//   - "receiverQueueSize", "maxPendingMessages", "compression",
//     "batchingMaxMessages", "batchingMaxSize" and
//     "batchingMaxPublishDelayMs": the consumers' and producers' settings,
//     defaults 5000, 10 000, none, 1000, 1 MiB and 10 ms (see
//     ClientSettings, which also says how they meet the function details'
//     own).
//
// Authentication: a "token" in the function's secrets (--secrets
// '{"token":"…"}') takes precedence over the worker's
// clientAuthenticationParameters, so that a tenant's function runs as the
// tenant rather than as the worker's superuser. Only token authentication is
// supported (token:…, file://…, or the bare token).
//
// Also honoured from the instance config: all input topics and regex
// patterns, subscription name (default tenant/namespace/name, the name the
// worker cleans up on delete), type and initial position, receiver queue
// size, negative-ack redelivery delay, output topic, compression type and
// max pending messages (unless the user config sets them, see
// ClientSettings), batch builder (KEY_BASED for an output read by a
// Key_Shared subscription), log topic (log lines of the runtime and of the
// handler through slog or log are copied there with property
// function=<fqfn>), TLS trust certs, insecure connection and hostname
// verification. Not honoured: timeoutMs (pulsar-client-go has no ack
// timeout), schemas and crypto specs (payloads are bytes).
//
// Metrics: the worker's names (pulsar_function_received_total,
// _processed_successfully_total, _user_exceptions_total,
// _system_exceptions_total with _1min variants, _last_invocation,
// _process_latency_ms summaries, _user_exception/_system_exception by error,
// and _user_metric by metric name) with labels tenant, namespace, name,
// instance_id (the instance number), cluster and fqfn. The _1min values are
// reset every minute and by the ResetMetrics call; totals are never reset.
// Beyond upstream, foldline_dead_letters_total counts the confirmed dead
// letters by reason class (DeadLetterReason: a fixed set, never the error's
// text), and a handler registers metrics of its own, histograms included,
// with FunctionContext.MetricsRegisterer. The worker's /metrics copies the
// endpoint's text as it is, so a histogram's buckets reach Prometheus;
// functions stats shows only the single numbers of RecordMetric. The names
// are constants (see MetricNames).
//
// Shutdown: on SIGTERM or SIGINT the instance stops taking messages, waits up
// to 4 s for outputs in flight, and closes consumers, producers and client,
// well within the worker's 10 s grace (and exits with an error at 9 s if
// closing hangs). An instance whose worker died shuts down the same way.
//
// Reconnection: the client reconnects by itself after broker restarts and
// topic unloads. When an unload lands while a consumer is reconnecting,
// pulsar-client-go (v0.19) may keep a consumer that the broker has already
// closed: nothing arrives while the subscription's backlog grows with no
// consumer attached. An instance that received nothing for 20 s asks the
// broker about each consumer (GetLastMessageIDs) and subscribes again for
// one the broker does not know.
package pf
