// Package agg is the pure core of a streaming aggregation: it compiles a
// query's aggregate (its query.Plan's, from sql: or aggregate:, over the
// map row of source, join and computed columns) into a Layout, folds decoded rows into partial
// aggregates (the map side), encodes group keys and partial values, hashes
// keys to state partitions, and decides what a state partition emits and
// evicts per output mode (the reduce side, docs/semantics.md "Emit and evict per output mode").
//
// It performs no I/O and reads no clock; state is reached through the small
// State interface its caller provides (and RangeEvicter, when the state
// can remove the rows below a key at once: keys are order-preserving and
// start with their bound, so a watermark closes exactly the keys below
// EvictBound's).
//
// Vocabulary: a group key is the encoded (event-time bound, groupBy values);
// the bound is the window start (the window's end is start+size) or, when
// grouping by the raw event-time column, that time. A partial is the
// per-measure accumulators of one group from one map task.
//
// Session windows (session.go, Spark's session_window) go through the same
// calls: Table.Add (AddSession for a gap per row) folds a row into the
// partial of its (key, session), Table.Partition merges a map task's
// sessions of a key and places them by the key alone, and Layout.Reduce
// merges them with the key's stored sessions and emits per output mode
// (append and complete; Spark refuses update). The state rows differ
// (one row per key holding its sessions, and an index by session end
// for eviction), but the wiring is the window aggregate's: a map task's
// partials, shuffled, reduced per state partition in map order.
package agg
