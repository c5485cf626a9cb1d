// Package executor is the executor process: a Node registers with the
// driver, heartbeats (and holds a write lease that lapses when the driver
// cannot be reached, lease.go), serves ExecutorService (prepare a query,
// run map and reduce tasks through package task) and ShuffleService
// (partials pushed by other executors, executor/shuffle), and drains on
// shutdown: Deregister, wait until no batch holds it, finish its tasks.
//
// Every store an executor writes through is wrapped so a write after the
// lease lapsed is refused (wire.ErrLeaseExpired) instead of racing the
// partition's new owner; reads and every optional capability of the
// wrapped store pass through.
//
// It does not plan batches, hold the checkpoint's logs or link the
// driver's batch loop (a test checks go list -deps ./cmd/executor).
package executor
