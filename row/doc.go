// Package row holds the engine's value model: typed values, rows, and the
// JSON decoder that turns a source record into a row against the query's
// declared schema.
//
// The decoder has two paths with one set of conversion rules: a fast path
// (fast.go) that reads the common record (a flat object, no escapes) in
// one pass, and the full path through fastjson's tree for everything else
// and for every malformed record. The fast path may only decline, never
// differ: fast_test.go compares the two on the conversion tables, on a
// million generated records and in a fuzz target.
//
// It performs no I/O. Timestamps are microseconds since the Unix epoch, UTC,
// as in Spark.
package row
