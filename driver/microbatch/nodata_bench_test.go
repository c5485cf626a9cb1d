package microbatch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/dispatch"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/task"
)

// BenchmarkNoDataBatch reports the median triggerExecution of no-data
// batches, with the checkpoint and sink on the local disk and on the S3
// test server: each iteration adds one file whose event is a minute later,
// so every data batch raises the watermark and a no-data batch follows;
// every fifth closes a window (8 state deltas, Parquet files, sink log).
// Run: go test ./driver/microbatch -run '^$' -bench NoDataBatch -benchtime 60x
func BenchmarkNoDataBatch(b *testing.B) {
	for _, where := range []string{"local", "s3", "s3-2-executors"} {
		b.Run(where, func(b *testing.B) {
			dir := b.TempDir()
			in := filepath.Join(dir, "in")
			writeEvent := func(i int) {
				ts := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
				writeLines(b, filepath.Join(in, fmt.Sprintf("%06d.jsonl", i)), ev(fmt.Sprint(i), fmt.Sprintf("c%d", i%3), ts.Format(time.RFC3339)))
			}
			writeEvent(0)
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			var opts microbatch.Options
			if where != "local" {
				srv := s3test.Start(b)
				spec.Sink.Parquet.Path, spec.CheckpointLocation = srv.URI("bench", "out/"), srv.URI("bench", "cp/")
				opts.Store = objstore.Options{S3: srv.Options("bench")}
			}
			spec.Trigger = query.Trigger{}
			reports := make(chan *progress.Report, 16)
			opts.Observer = progress.Committed(func(p *progress.Report) { reports <- p })
			job, err := microbatch.Build(context.Background(), spec, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer job.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			if where == "s3-2-executors" {
				runner := startCluster(b, ctx, job, opts)
				go func() { done <- job.RunWith(ctx, runner, nil) }()
			} else {
				go func() { done <- job.Run(ctx, nil) }()
			}
			var closing, quiet []float64
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				writeEvent(i)
				for {
					p := <-reports
					if !p.NoData {
						continue
					}
					ms := float64(p.DurationMs["triggerExecution"])
					if p.Sink.NumOutputRows > 0 {
						closing = append(closing, ms)
					} else {
						quiet = append(quiet, ms)
					}
					break
				}
			}
			b.StopTimer()
			cancel()
			<-done
			b.ReportMetric(median(quiet), "ms/no-data-batch")
			b.ReportMetric(median(closing), "ms/no-data-batch-closing-a-window")
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// startCluster starts a driver service and two executor nodes over gRPC on
// loopback, in this process, and returns a runner for job.
func startCluster(b *testing.B, ctx context.Context, job *microbatch.Job, opts microbatch.Options) task.Runner {
	drv, err := dispatch.NewDriver(dispatch.DriverOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	go drv.Serve(ctx)
	for i := 0; i < 2; i++ {
		node, err := executor.NewNode(executor.NodeOptions{Driver: drv.Addr(), Listen: "127.0.0.1:0", DataDir: b.TempDir(), Task: task.OpenOptions{Store: opts.Store}})
		if err != nil {
			b.Fatal(err)
		}
		go node.Run(ctx)
	}
	runner, err := drv.NewRunner(dispatch.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, MinExecutors: 2})
	if err != nil {
		b.Fatal(err)
	}
	return runner
}
