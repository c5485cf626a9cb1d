// Package task runs the tasks of a micro-batch, as the query's plan
// (query.Plan, the same for sql: and aggregate:) says: map tasks read one
// source split, decode it against the schema, run the filter pushed below
// the watermark, set malformed records aside (a record that does not
// decode, or whose expression fails), track event time, and fold rows into
// partial aggregates hashed by key to state partitions (after the join,
// the filter and the computed columns), or keep each key's first row for
// a deduplication, or project the rows that pass through; reduce tasks
// load a state partition at the batch's version, merge the partials (then
// HAVING and the projection) or drop the keys in state (then the join,
// the filter and the projection), emit and evict per output mode, commit
// the next state version and write the partition's sink files.
//
// Local runs a whole batch in this process over the same task functions the
// distributed executors call, so distribution only moves tasks and bytes.
// It is a PhasedRunner: a batch's map tasks can be started before the
// batch is logged (ahead: they write nothing, and call no hook, until
// TakeMaps), and its reduce tasks run on their output, which lets the
// scheduler read the next batch while one commits.
package task
