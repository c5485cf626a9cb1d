// Package demo is what `driver demo` runs: the five-minute course-activity
// tile (Spec, on the generator's events, Events) on a whole cluster in one
// process. Run starts an embedded Kafka-protocol broker (kfake) with its
// data under the demo's directory, a feeder producing generator events to
// it at the configured rate (Feed), the driver's gRPC services and two
// executors on loopback, and runs the query on them until its context
// ends; a second Run on the same directory resumes the checkpoint and the
// event sequence.
//
// It owns the wiring of that embedded cluster and its shutdown order
// (executors drain while the driver still serves). It prints nothing: the
// caller says how to announce the run and what to do with each batch's
// progress (cmd/driver prints the closed windows). It does not plan or run
// batches itself (packages engine, scheduler and cluster do).
package demo
