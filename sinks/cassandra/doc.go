// Package cassandra is Foldline's Cassandra sink: it applies a view's
// operations (envelope.ViewOp payloads, bound as envelope.RowOp) to the
// view's table with an exactly-once effect under at-least-once delivery, and
// creates or checks the table.
//
// # Exactly-once effect
//
// Every row carries, next to its key and value columns, the last origin
// position applied to it per origin topic (ColumnApplied, a map from ledger
// partition to position): positions of different ledger partitions are not
// comparable, and one row may be fed by many (product_sales is re-keyed by
// sku). Delivery keeps the order of each origin partition per key, so an
// operation whose position is at or before the row's entry for its partition
// has been applied already and is skipped (every output of one ledger event
// has a position of its own, envelope.Position.Path, and positions of another
// epoch of the ledger topic are rejected, never skipped: ErrEpochChanged). The
// other operations fold into
// the row with the reference merge rules (those of functions/transform/memview),
// and the new values and the new positions go to Cassandra in ONE UPDATE of
// the row's partition, which Cassandra applies atomically and in isolation:
// a crash leaves either the old row with the old positions or the new row
// with the new ones, never values without their positions. A redelivered
// batch, or one that crashed half way, therefore applies exactly the
// operations that are not in the row yet. Several rows' UPDATEs may travel
// in one unlogged batch: that changes nothing of the above, as each stays
// one partition's mutation; the batch as a whole is not atomic and need not
// be.
//
// A delete keeps the row as a tombstone (ColumnDeleted true, values null)
// that remembers its positions, so a redelivered older upsert is recognised
// and cannot resurrect it. ColumnDeleted is written only when it changes, so
// it is null on a row never deleted.
//
// Why read-fold-write and not write timestamps or lightweight transactions:
// USING TIMESTAMP derived from positions cannot express add, and positions of
// different partitions have no common order to map to time. A lightweight
// transaction (IF fl_applied = ?) would also guard against two writers of
// one row, but costs a Paxos round per write, several times a plain write.
// The sink relies on a single writer per row instead: Apply calls are
// serialised, each row is read, folded and written by one goroutine at a
// time, and
// the deployment gives each key one sink instance (one instance, or a
// key-ordered subscription). Writes are plain, idempotent UPDATEs.
//
// To save the read, the Applier keeps a bounded LRU cache of rows it wrote
// (Settings.RowCache). A cached row is only right while no one else writes
// it, so the cache is correct when each row has one writer for the sink
// instance's whole life: always with parallelism 1 (a restart empties it).
// With several instances a key can move to another instance and back when
// instances restart; set row_cache to 0 there.
//
// # Batching
//
// Apply takes a batch, coalesces the operations of each row into one write,
// and queues the rows without waiting for Cassandra. Settings.Concurrency
// workers each take up to Settings.RowsPerWrite rows that are ready (no
// earlier write of the row pending), with the row's later batches already
// queued, read the uncached ones with one IN query (for a view keyed by one
// column), fold, and write them with one request: an unlogged batch of the
// rows' UPDATEs (about 4 KiB at most, below Cassandra's batch size
// warning), with prepared statements and token-aware routing (by the first
// row's key). A batch Cassandra refuses is written again a row at a time.
// Batcher turns single handler calls into batches.
//
// An operation is reported applied only after Cassandra confirmed its row's
// write; failures other than a rejected operation are retried with backoff
// forever, so while Cassandra is down nothing is acknowledged or dropped.
package cassandra
