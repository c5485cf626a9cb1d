package dispatch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/task"
)

// BenchmarkNoDataBatchOnTwoExecutors times RunBatch of a batch with no new
// data on two executors over loopback gRPC, after the tile ran (so state
// partitions are warm): the fixed cost of the distributed path per batch
// (reduce calls, state open and commit), without the checkpoint's log
// writes that the scheduler adds.
func BenchmarkNoDataBatchOnTwoExecutors(b *testing.B) {
	in, _ := tileInput(b, 6000)
	c := newTestCluster(b, 2, "")
	dir := b.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	var last *progress.Report
	ctx := context.Background()
	job, err := microbatch.Build(ctx, spec, microbatch.Options{Observer: progress.Committed(func(p *progress.Report) { last = p })})
	if err != nil {
		b.Fatal(err)
	}
	defer job.Close()
	r, err := c.driver.NewRunner(RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec})
	if err != nil {
		b.Fatal(err)
	}
	if err := job.RunWith(ctx, r, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plan := task.BatchPlan{Batch: last.BatchID + 1 + ids.BatchID(i), Partitions: job.Spec.ShufflePartitions}
		if _, err := r.RunBatch(ctx, plan); err != nil {
			b.Fatal(err)
		}
	}
}
