// Package microbatch is one query's micro-batch loop on the driver.
//
// Build (engine.go) assembles a runnable query from its spec: Check
// refuses what can be known to be wrong before anything is created, then
// it opens the checkpoint, source, sink, state and bad-records stores the
// spec names (task.Open, what any process that runs tasks opens), binds
// the query to its checkpoint and returns a Job that runs on a task
// runner (in this process by default, or package dispatch's on
// executors).
//
// Each batch goes planned → running → committing → committed:
//
//	plan N      read the source's available offsets, cap them, fix the
//	            batch watermark; write offsets/N (create-if-absent)
//	run N       dispatch map and reduce tasks to a Runner (in-process or
//	            executors); state version N+1 and sink files are written
//	commit N    the sink's log entry for N, then commits/N with the next
//	            watermark (create-if-absent)
//
// A batch that fails is retried whole from its logged offsets (failed →
// retrying), never re-planned. On start, the checkpoint decides: a batch
// with offsets and no commit runs again exactly as logged; otherwise the
// next batch is planned from the last commit (docs/semantics.md, "Restart").
//
// Overlap: with availableNow or processingTime 0, on a runner that can
// start map tasks before their batch is logged (task.PhasedRunner: the
// in-process one and dispatch's), a batch runs as map tasks then
// reduce tasks, and once its map tasks end the next batch is planned and
// its map tasks started while this one reduces and commits. What makes that safe: the next
// batch's late-row watermark is this batch's evict watermark and its evict
// watermark comes from this batch's map tasks, so its entry is the one it
// would have had; its offsets/N+1 is still written only after commits/N,
// and its map tasks write nothing (bad records, hooks) until then; a
// failure of this batch, a stop or a crash abandons it, and it is planned
// again from the log. Queries with a join do not overlap (a batch's
// snapshot is taken when it is planned).
//
// Retention runs beside the loop, never in it: a cleaner goroutine owned by
// Run (retention.go) deletes the log entries and state files older than
// minBatchesToRetain batches, every CleanupEvery commits and once at start;
// its failures are logged and counted, never a batch's.
//
// The batch loop is a state machine. Its decisions are one pure step
// (step.go): from the loop's state and what just happened (an event: the
// run started, a batch was planned with or without data, a write or a run
// succeeded or failed with a classified Kind, a wait ended, a stop, pause
// or lost lease) to the next action (plan, write offsets/N, run, write
// commits/N, wait, stop). Retry budgets and back-off (one policy for
// planning, log writes and batches), no-data batches, watermark
// arithmetic, triggers and giving up are decided there; testdata/step has
// a datadriven case for each transition. Run (loop.go) performs the
// actions, does I/O only through the checkpoint log, the source, the
// runner and the sink, and waits only on Config.Clock.
package microbatch
