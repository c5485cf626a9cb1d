// Package checkpoint owns a query's checkpoint: the only recovery cursor.
//
// Layout (as Spark's, so operators recognise it):
//
//	<checkpoint>/metadata        query id, name, fingerprints, frozen settings
//	<checkpoint>/offsets/<N>     batch N's source ranges, watermarks, batch time
//	<checkpoint>/commits/<N>     written after the sink committed batch N
//	<checkpoint>/state/...       state files (package statestore)
//
// Log entries are small JSON documents with a format version, readable
// with cat.
//
// # Protocol
//
// A driver plans batch N, writes offsets/N, runs it, commits the sink, then
// writes commits/N. Every log entry is written with create-if-absent
// (objstore.Store.PutIfAbsent: S3 If-None-Match: *, a link on a
// filesystem). A driver that finds offsets/N without commits/N when it
// starts re-runs batch N exactly as logged: that is recovery, not a
// conflict. A driver whose create-if-absent of offsets/N or commits/N loses
// to another writer stops the query with ErrFenced: of two drivers on one
// checkpoint, only one can ever commit a given batch, and the loser learns
// it at its next log write.
//
// # Retention
//
// A checkpoint keeps the newest minBatchesToRetain batches (RetainFrom,
// pure): Cleanup deletes older offsets and commits entries, the driver's
// background cleaner calling it after the state's own cleanup. A restart
// lists offsets/ and commits/ (bounded by retention) and reads only the
// newest entry of each (Latest).
//
// This package does I/O only through objstore.Store; Decide and
// RetainFrom are pure.
package checkpoint
