// Package eventtime holds Spark's event-time rules as pure functions:
// window assignment, the watermark and its per-batch progression, and the
// late-row and eviction predicates, as docs/semantics.md states them.
//
// It performs no I/O and reads no clock. All times are microseconds since
// the Unix epoch; watermarks are whole milliseconds (as in Spark), stored in
// microseconds.
package eventtime
