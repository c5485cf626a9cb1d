// Command sluicebench measures the engine's speed on the course-activity
// tile (five-minute windows, count per course, append, ten-minute
// watermark) and reports it as ratios within one run, because the machines
// are shared and noisy:
//
//   - two references, run in the same rounds as the engine: the fair
//     reference (the engine's decoder and field list, one goroutine per
//     core, counts in Go maps: what exactly-once costs) and the bare loop
//     (fastjson and time.Parse instead of the engine's decoder: what the
//     whole engine costs against the loop a user writes first);
//   - raw loop: one goroutine decoding lines in memory, a yardstick of the
//     cores the machine gives;
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
