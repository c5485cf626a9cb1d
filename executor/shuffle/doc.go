// Package shuffle moves a batch's partial aggregates from map tasks to the
// owners of their state partitions.
//
// A map task's partials are already grouped by state partition (agg hashes
// each group key with the stable agg.Hash, recorded in the checkpoint as
// agg.KeyHashName). Push encodes them in chunks and streams each owner its
// partitions over ShuffleService.PushPartials (to itself without a
// network hop); gRPC flow control is the back-pressure, and the sender holds
// one chunk per stream beyond the map task's own table.
//
// The owner keeps what arrives in a Buffer, per (query, run, batch,
// partition, map index), keeping only the highest attempt of each map task:
// a retried map task's partials replace the first attempt's, never add to
// them. A reduce task takes its partition's partials with Buffer.Wait, which
// returns only when the accepted attempt of every map task is there, in map
// index order so that merging is deterministic. The Buffer holds at most
// its memory limit in memory and spills the rest to files in its spill
// directory; a batch's data is dropped when the driver releases the batch.
//
// Vocabulary: a partial is one group's (key, accumulators); a chunk is a
// run of encoded partials (or pass-through rows) that decodes on its own;
// an attempt is one launch of a map task, numbered so that later launches
// have higher numbers.
//
// The package performs I/O only on its spill directory and through the
// gRPC stream it is given; it knows nothing of scheduling.
package shuffle
