// Package task runs the tasks of a micro-batch: map tasks read one
// source split, decode it against the schema, set malformed records aside,
// track event time and fold rows into partial aggregates hashed by key to
// state partitions; reduce tasks load a state partition at the batch's
// version, merge the partials, emit and evict per output mode, commit the
// next state version and write the partition's sink files.
//
// Local runs a whole batch in this process over the same task functions the
// distributed executors call, so distribution only moves tasks and bytes.
// It is a PhasedRunner: a batch's map tasks can be started before the
// batch is logged (ahead: they write nothing, and call no hook, until
// TakeMaps), and its reduce tasks run on their output, which lets the
// scheduler read the next batch while one commits.
package task
