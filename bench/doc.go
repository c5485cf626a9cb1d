// Command sluicebench measures the engine's speed on the course-activity
// tile (five-minute windows, count per course, append, ten-minute
// watermark) and reports it as ratios within one run, because the machines
// are shared and noisy:
//
//   - raw loop: one goroutine decoding the generator's JSON lines with the
//     engine's decoder, assigning windows and counting in a Go map: the
//     floor the engine is compared against;
//   - engine: the same events through engine.Build and Job.Run in this
//     process (availableNow, Parquet sink, local checkpoint), once with the
//     generator source and once with the file source over the same lines;
//   - no-data batches: the triggerExecution time of the batches that only
//     advance the watermark;
//   - object-store requests per batch on the checkpoint store (counted with
//     objstore.NewCounting) and objects the sink writes; on the
//     S3-compatible server, by operation as they go over the wire;
//   - recovery after a driver or an executor SIGKILL, backlog and state
//     memory, scaling, latency (the modes; see README.md).
//
// Measurements that report through a Section are listed in section.go's
// modes; README.md says how to add one.
//
// It only reads the engine's public API. Speed is measured here and never
// asserted in tests: the test in this directory runs the harness on a few
// thousand rows and checks the engine's output against the raw loop's
// counts.
package main
