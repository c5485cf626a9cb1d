// Package sink defines where a batch's output rows go: the contracts the
// scheduler and executors program against (sink.go) and nothing else.
//
//   - FileSink: exactly-once files. Reduce tasks write each (batch,
//     partition)'s rows with deterministic names and bytes; the driver
//     records the batch's file list in the sink log with create-if-absent,
//     and skips a batch already there. Implemented by sink/parquet, which
//     is also a Gatherer: small partition outputs come back to the driver
//     and are staged together, in few files.
//   - BatchWriter (and the optional PartitionedBatchWriter): foreachBatch,
//     called on the driver with a whole batch, possibly more than once per
//     batch id; exactly-once only if idempotent on the batch id.
//     Implemented by sink/jsonbatches (batch_id=N/ directories replaced
//     whole; its naive appending writer shows the duplicate a retry causes)
//     and sink/console (labs).
//
// This package performs no I/O and knows no storage format; the
// sub-packages own their layouts and write only through objstore.Store or
// the io.Writer they are given. None of them decides what a batch emits,
// when it is re-run, or touches the checkpoint.
package sink
