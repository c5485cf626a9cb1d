// Package jsonbatches is the idempotent foreachBatch writer: each batch's
// output rows go to their own directory, batch_id=N/, written once, so a
// re-run batch leaves one copy in every output mode. It also keeps the
// naive appending writer that shows why that matters.
//
// Layout, under a store rooted at the sink path:
//
//	batch_id=N/part-P.jsonl   state partition P's rows (part-0 for WriteBatch)
//	batch_id=N/_SUCCESS       written last: the directory is complete
//
// Each line is one row as a JSON object with the output column names in
// column order: strings and timestamps (RFC 3339, UTC, microseconds as
// needed) as JSON strings, longs and doubles as numbers, booleans as
// true/false, null as null. A double that JSON cannot hold is written as the
// string "NaN", "Infinity" or "-Infinity".
//
// On a store with objstore.Multipart (S3, the filesystem), a batch
// directory is staged: every part and _SUCCESS is a multipart upload
// (hidden "_<name>.<upload>-1.inprogress" files on a filesystem), recorded
// in _pending/<N>-<attempt>.json before any byte is sent. When all bytes
// are staged the record is marked completing; then the parts are completed
// and _SUCCESS last, and the record is deleted. Each call first resolves
// the records an earlier driver left: a completing one is completed
// (idempotently), any other aborted. So batch_id=N/ holds nothing of an
// attempt that did not reach "completing", never a mix of two attempts, and
// a reader that waits for _SUCCESS sees the batch whole or not at all (S3
// has no atomic multi-object write, so a reader ignoring _SUCCESS may see
// the parts appear one by one during a completion).
//
// A batch whose directory already has _SUCCESS is not written again: a
// reader may have consumed it, and a re-run that read different data must
// not change it (idempotent on the batch id). A directory without _SUCCESS
// (written by an older version) is cleared and written.
//
// On a store without Multipart a rewrite first deletes _SUCCESS, then
// every other object under batch_id=N/, then writes each part with Put
// (atomic per object), then _SUCCESS.
//
// Pending-record format version: 1.
//
// It does not decide when a batch is written or re-run, and keeps no state
// between calls: the directory is the only record.
package jsonbatches
