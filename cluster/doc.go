// Package cluster runs a query's batches on executor processes over gRPC:
// the driver's side (Membership of registered executors with heartbeats and
// draining, the DriverService they call, and Runner, which implements
// executor.Runner by sending map and reduce tasks to executors) and the
// executor's side (Node: registration, heartbeats, ExecutorService and
// ShuffleService, draining on shutdown). Every service checks a shared
// token (auth.go).
//
// Which executor owns which state partition is decided by Assign, a pure
// function. Partials move between executors through package shuffle;
// state moves through the checkpoint (a new owner opens the version the
// batch needs and the state provider loads it).
//
// A batch on the cluster:
//
//	driver (Runner)                          executors (Node)
//	assign partitions (sticky)
//	PrepareQuery on each member  --------->  build the task Env once
//	RunMapTask per split         --------->  executor.RunMap, then push each
//	  (retried on another executor            partition's partials to its
//	   when a task fails)                     owner (ShuffleService)
//	RunReduceTask per partition  --------->  wait for the accepted attempt of
//	                                          every map task, executor.RunReduce
//	collect files, rows, metrics <---------
//	ReleaseBatch                 --------->  drop the batch's shuffle data
//
// Losing an owner fails the batch; the scheduler retries it whole from its
// logged offsets, and the next attempt assigns the lost executor's
// partitions to the others.
//
// Generated protobuf types stay in this package and in shuffle; the engine
// packages it calls take domain types.
package cluster
