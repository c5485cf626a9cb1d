// Package executor runs the tasks of a micro-batch: map tasks read one
// source split, decode it against the schema, set malformed records aside,
// track event time and fold rows into partial aggregates hashed by key to
// state partitions; reduce tasks load a state partition at the batch's
// version, merge the partials, emit and evict per output mode, commit the
// next state version and write the partition's sink files.
//
// Local runs a whole batch in this process over the same task functions the
// distributed executors call, so distribution only moves tasks and bytes.
package executor
