// Package row holds the engine's value model: typed values, rows, and the
// JSON decoder that turns a source record into a row against the query's
// declared schema.
//
// It performs no I/O. Timestamps are microseconds since the Unix epoch, UTC,
// as in Spark.
package row
