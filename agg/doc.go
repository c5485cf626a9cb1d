// Package agg is the pure core of a streaming aggregation: it compiles a
// query's aggregate into a Layout, folds decoded rows into partial
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
package agg
