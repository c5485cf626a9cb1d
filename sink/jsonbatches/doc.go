// Package jsonbatches is the idempotent foreachBatch writer: each batch's
// output rows go to their own directory, batch_id=N/, replaced whole when a
// batch is written again, so a re-run batch leaves one copy in every output
// mode. It also keeps the naive appending writer that shows why that
// matters.
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
// A rewrite first deletes _SUCCESS, then every other object under
// batch_id=N/, then writes each part with Put (atomic per object), then
// _SUCCESS. A reader that sees _SUCCESS sees a complete batch; one that
// reads a directory being replaced may see part of it.
//
// It does not decide when a batch is written or re-run, and keeps no state
// between calls: the directory is the only record.
package jsonbatches
