// Package dispatch is the driver's side of a query's batches on executor
// processes over gRPC: Membership of registered executors with heartbeats
// and draining, the DriverService they call (Driver), and Runner, which
// implements task.Runner by sending map and reduce tasks to executors. The
// executor's side (Node: registration, heartbeats, ExecutorService and
// ShuffleService, draining on shutdown) is package executor; what crosses
// between the two (domain errors, row and partial framing) is package
// wire, and credentials are package wire/rpcauth.
//
// Which executor owns which state partition is decided by Assign, a pure
// function. Partials move between executors through package executor/shuffle;
// state moves through the checkpoint (a new owner opens the version the
// batch needs and the state provider loads it).
//
// A batch on the cluster:
//
//	driver (Runner)                          executors (Node)
//	assign partitions (sticky)
//	PrepareQuery on each member  --------->  build the task Env once
//	RunMapTask per split         --------->  task.RunMap, then push each
//	  (retried on another executor            partition's partials to its
//	   when a task fails)                     owner (ShuffleService)
//	RunReduceTask per partition  --------->  wait for the accepted attempt of
//	                                          every map task, task.RunReduce
//	collect files, rows, metrics <---------
//	ReleaseBatch                 --------->  drop the batch's shuffle data
//
// Losing an owner fails the batch; the scheduler retries it whole from its
// logged offsets, and the next attempt assigns the lost executor's
// partitions to the others.
//
// Overlap: Runner is an task.PhasedRunner, so with availableNow or
// processingTime 0 the scheduler starts the next batch's map tasks while
// a batch reduces and commits, as in one process. Such a task runs with
// RunMapTaskRequest.ahead: it pushes its partials (keyed by batch, so the
// batch reducing keeps its own) but holds its malformed records and calls
// no hook; once the batch is logged, TakeMaps has each executor finish
// its tasks (FinishMapTasks: the records set aside, the map-done hook, in
// task order). A batch dropped before it is logged releases its shuffle
// data and held tasks (ReleaseBatch) and its hold on the executors. An
// executor keeps the shuffle data of the batch before the one whose map
// task arrives (that one may still be reducing) and drops what is older.
// A draining executor is left out of the batches started after its drain
// began, so it is free once the batch started before ends.
//
// Failures: a map task that fails is launched again (a new attempt
// number) on another executor, up to RunnerOptions.MapAttempts; owners keep
// only the highest attempt of each map task, so a retry's partials replace
// the first attempt's. An executor is lost when a call to it fails at the
// transport (UNAVAILABLE), when a map task reports it could not push to it
// (a ShuffleFailure detail), or when it misses heartbeats for
// DriverOptions.HeartbeatTimeout (a hung process); in-flight calls to it
// are cancelled. Losing the owner of a partition aborts the batch at once.
//
// Task errors keep their meaning across gRPC (package wire): a task failing on
// a condition callers act on (source.ErrDataLoss, statestore.ErrCorrupt,
// statestore.ErrMemoryLimit, checkpoint.ErrFenced,
// checkpoint.ErrIncompatibleCheckpoint, wire.ErrLeaseExpired, ...) returns a
// status with a DomainError detail naming its kind, and the Runner returns
// a *wire.RemoteError that matches the same sentinel with the executor's
// message, so the scheduler stops or retries as in one process. Such a map
// task is not launched again on another executor (every executor would
// find the same data loss), except for the executor's own conditions (its
// lease, its memory limit). Other errors arrive as INTERNAL, unchanged.
//
// Draining: SIGTERM makes an executor call Deregister; the driver stops
// giving it batches and answers once no running batch holds it (BatchHold), so
// its partitions are handed back at a batch boundary; then it finishes its
// tasks and exits. Joining: an executor that registers while a query runs
// gets its share of partitions at the next batch.
//
// Limits (memory is bounded per batch, never by the stream's length):
//   - a map task holds its split's partial table (task.RunMap returns
//     it whole) and one chunk (wire.DefaultChunkBytes) per owner stream;
//     gRPC flow control holds the sender back when an owner is slow;
//   - an owner holds pushed partials in memory up to --shuffle-memory
//     (default 256 MiB) and spills the rest to --data-dir until the batch
//     is released;
//   - a reduce task decodes one partition's partials from every map task at
//     once (agg.Layout.Reduce takes them together);
//   - rows returned to the driver for a driver-side sink (jsonBatches,
//     console, foreachBatch) stream in pieces of 256 KiB (cut through a
//     row too), joined by the driver per partition; Parquet output is
//     written by executors;
//   - no gRPC message, either way, exceeds rpcauth.MaxMessageBytes (4 MiB): a
//     shuffle record larger than a chunk goes in pieces the owner joins;
//     gRPC buffers a whole message before the token is checked, so that
//     is what an unauthenticated peer can make a server allocate per
//     stream;
//   - the in-memory state provider keeps partitions that moved away cached
//     until the executor restarts (statestore has no call to evict them).
//
// Security: package wire/rpcauth builds every credential (the cluster
// token, TLS, roles on the driver's server); NewRunner refuses to send a
// spec with secrets to executors over plaintext beyond loopback.
//
// Generated protobuf types stay in this package, executor and wire; the
// engine packages they call take domain types.
package dispatch
