// Package driver groups what only the driver process runs:
//
//   - service: the query lifecycle (the registry's lease, reconciling
//     desired and observed state, submit and admission, the CLI's
//     ControlService); the only sender of stop, pause and lease loss;
//   - microbatch: one query's batch loop (plan, log, run, commit), whose
//     step is the only decider of a batch's fate;
//   - dispatch: tasks to executor processes over gRPC, and the
//     DriverService executors call;
//   - registry and policy: the queries' registry and lease over the object
//     store, and who may read and write where;
//   - demo: the whole architecture embedded in one process.
//
// What only an executor runs is package executor; what both run is
// package task (map and reduce functions), and what crosses between them
// is package wire.
package driver
