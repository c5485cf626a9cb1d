// Package dedup is the pure core of deduplication within the watermark,
// Spark 3.5's dropDuplicatesWithinWatermark (its
// StreamingDeduplicateWithinWatermarkExec), as docs/semantics.md
// ("Deduplication within the watermark") states it: per row, in the
// batch's read order, a row whose event time is at or before W_late is
// dropped as late; then a row whose key is in state is dropped as a
// duplicate; otherwise the row is kept and its key stored with
// expiresAt = event time + delay. After the batch, every key with
// W_evict >= expiresAt leaves the state.
//
// It performs no I/O and reads no clock; its state is an agg.State (a
// statestore.Store: memory or pebble, versioned per batch) that its
// caller opens and commits.
//
// # The split across a batch
//
// Map side (Table, one per map task): Add drops late rows, keeps the
// first row of each key within the task (a later one can never be the
// batch's first) and puts the kept rows by state partition (PartitionOf
// the encoded key, agg.PartitionOf), each partition's rows in the task's
// read order. Rows returns them for the shuffle, which sends a task's
// rows to a partition in order (the pass-through rows' path).
//
// Reduce side (Layout.Reduce, one per state partition and batch): the
// rows of every map task, rows[m] from map task m in map order, each in
// its read order. The first row of a key in the batch is the first in
// (map index, position in the task's rows): the carried order, not a
// timestamp or an arrival order. Map tasks are numbered by the batch's
// splits, which the driver derives from the batch's logged offsets, and
// a task reads its split in order, so a re-run of a logged batch keeps
// the same rows and writes the same state (Spark keeps the first row to
// arrive: spark-differences.md#dedup-first-row). Reduce returns the kept
// rows in that order (they go on to the sink, or to the aggregate's map side).
//
// # State
//
// Two rows per key, both starting with 8 bytes so that the memory
// provider's tables per bound (statestore.MemoryOptions.BoundPrefix) keep
// each expiry's rows together:
//
//	primary  "\xff"x8 ‖ key         → format 1 ‖ expiresAt (8 bytes)
//	expiry   expiresAt ‖ key        → (empty)
//
// The key is the dedup keys' values as agg encodes a group key
// (agg.AppendKey: order-preserving, a null is a value of its own, so rows
// with null keys are duplicates of each other, as Spark's key rows with
// null fields are equal). Times are agg.AppendBound's encoding, and
// expiresAt stays below math.MaxInt64, the primary rows' prefix, so every
// expiry row sorts below every primary row. A watermark W evicts with one
// EvictBelow(AppendBound(W+1)): the expiry rows of every key with
// expiresAt <= W, each of which names its primary row to delete; Spark
// instead scans every key each batch. The state's row count is twice
// Spark's (spark-differences.md#state-index-rows). A key is looked up with one Get.
//
// A row with a null event time is not late (null <= W is not true) and
// its key expires delay after the epoch: Spark reads the null time's
// slot, which is 0.
//
// # What the caller wires
//
// With dedup and no aggregate (package task), the map task puts its rows
// through a Table instead of the pass-through round-robin, and the reduce
// task runs Layout.Reduce on the query's state store (dedup is then its
// only stateful operator) and sends the kept rows on to the join, the
// filter, the projection and the sink. With an aggregate after it, the
// kept rows would be the aggregate's input and need a second shuffle, by
// the aggregate's key (Spark plans two stateful operators with two
// exchanges): this build refuses that query at validation
// (query.ReasonDedupAggregate). EvictsByWatermark says a no-data batch
// follows a batch that raised the watermark, in every output mode
// (Spark's shouldRunAnotherBatch for dedup).
package dedup
