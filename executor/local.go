package executor

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
)

// BatchPlan is one batch as the driver dispatches it.
type BatchPlan struct {
	Batch      ids.BatchID
	Splits     []source.Split
	Watermark  eventtime.Batch
	Partitions int
	SkipSink   bool
	// BatchTimestampMs is the batch's processing time from its offset-log
	// entry.
	BatchTimestampMs int64
	// RunID is the driver run dispatching the batch: in process it names
	// the attempt the state files are written under (see
	// statestore.AttemptID; the cluster runner uses its own run id and
	// the map attempts).
	RunID string
	// Manifest is the join's snapshot the batch joins against (from its
	// offset-log entry; zero without a join).
	Manifest join.Ref
	// GatherBelow is what reduce tasks gather below (see
	// ReduceTask.GatherBelow).
	GatherBelow int64
}

// BatchResult gathers a batch's task results and metrics.
type BatchResult struct {
	InputRows          int64
	Malformed          int64
	DroppedByWatermark int64
	TooFarAhead        int64
	JoinUnmatched      int64
	MinEventTime       int64
	MaxEventTime       int64
	HasEventTime       bool
	Reduces            []*ReduceResult
	MapDuration        time.Duration
	ReduceDuration     time.Duration
	// ShuffleBytes are the bytes map tasks pushed to other executors (0 in
	// process).
	ShuffleBytes int64
}

// Runner runs a planned batch's map and reduce tasks somewhere.
type Runner interface {
	RunBatch(ctx context.Context, plan BatchPlan) (*BatchResult, error)
}

// Local runs tasks in this process, in parallel.
type Local struct {
	Env *Env
	// Parallelism bounds concurrent tasks; zero means GOMAXPROCS.
	Parallelism int
}

// RunBatch runs every map task, then every reduce task.
func (l *Local) RunBatch(ctx context.Context, plan BatchPlan) (*BatchResult, error) {
	par := l.Parallelism
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	res := &BatchResult{}
	start := time.Now()
	maps := make([]*MapResult, len(plan.Splits))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i, sp := range plan.Splits {
		g.Go(func() error {
			r, err := RunMap(gctx, l.Env, MapTask{Batch: plan.Batch, Index: i, Split: sp, Late: plan.Watermark.Late, Partitions: plan.Partitions, BatchTimestampMs: plan.BatchTimestampMs, Manifest: plan.Manifest})
			maps[i] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, m := range maps {
		res.add(m)
	}
	res.MapDuration = time.Since(start)
	l.Env.hook("maps-done", plan.Batch)

	start = time.Now()
	res.Reduces = make([]*ReduceResult, plan.Partitions)
	g, gctx = errgroup.WithContext(ctx)
	// Reduce tasks of small batches mostly wait on writes (state deltas,
	// sink files, each fsynced): let every partition's run at once.
	g.SetLimit(max(par, plan.Partitions))
	for p := range ids.PartitionID(plan.Partitions) {
		g.Go(func() error {
			var partials [][]agg.Entry
			var rows [][]row.Row
			for _, m := range maps {
				if m.Partials != nil {
					partials = append(partials, m.Partials[p])
				} else {
					rows = append(rows, m.Rows[p])
				}
			}
			r, err := RunReduce(gctx, l.Env, ReduceTask{
				Batch: plan.Batch, Partition: p, Watermark: plan.Watermark, SkipSink: plan.SkipSink,
				StateAttempt: statestore.AttemptID(plan.RunID, plan.Batch, nil),
				GatherBelow:  plan.GatherBelow,
			}, partials, rows)
			res.Reduces[p] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res.ReduceDuration = time.Since(start)
	return res, nil
}

// add folds a map task's metrics into the batch's.
func (r *BatchResult) add(m *MapResult) {
	r.InputRows += m.InputRows
	r.Malformed += m.Malformed
	r.DroppedByWatermark += m.DroppedByWatermark
	r.TooFarAhead += m.TooFarAhead
	r.JoinUnmatched += m.JoinUnmatched
	if m.HasEventTime {
		if !r.HasEventTime || m.MaxEventTime > r.MaxEventTime {
			r.MaxEventTime = m.MaxEventTime
		}
		if !r.HasEventTime || m.MinEventTime < r.MinEventTime {
			r.MinEventTime = m.MinEventTime
		}
		r.HasEventTime = true
	}
}
