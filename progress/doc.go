// Package progress holds the report of one batch, shaped like Spark's
// StreamingQueryProgress: what the batch loop produces and what the
// tracker, metrics, the status page, progress files and the CLI read.
//
// It owns the report's types and its one-line rendering. It performs no
// I/O and does not depend on the batch loop, so observability never
// imports the loop.
package progress
