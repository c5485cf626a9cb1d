package task

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
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
	// Duplicates counts the rows a deduplication dropped
	// (numDroppedDuplicateRows): in map tasks and reduce tasks.
	Duplicates     int64
	MinEventTime   int64
	MaxEventTime   int64
	HasEventTime   bool
	Reduces        []*ReduceResult
	MapDuration    time.Duration
	ReduceDuration time.Duration
	// ShuffleBytes are the bytes map tasks pushed to other executors (0 in
	// process).
	ShuffleBytes int64
}

// Runner runs a planned batch's map and reduce tasks somewhere.
//
// When the batch loop has accepted a graceful stop, Draining(ctx) is
// closed: the batch in flight is let to commit, but a runner that has
// dispatched nothing yet (it is waiting for executors) should give up at
// once with an error wrapping context.Canceled; the batch's logged offsets
// are re-run by the next run.
type Runner interface {
	RunBatch(ctx context.Context, plan BatchPlan) (*BatchResult, error)
}

type drainingKey struct{}

// WithDraining returns ctx carrying draining, the channel the batch loop
// closes when it accepts a graceful stop.
func WithDraining(ctx context.Context, draining <-chan struct{}) context.Context {
	return context.WithValue(ctx, drainingKey{}, draining)
}

// Draining returns the channel closed once the batch loop accepted a
// graceful stop (nil, which never closes, outside a loop).
func Draining(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(drainingKey{}).(<-chan struct{})
	return ch
}

// PhasedRunner is optional for a Runner: a batch's map tasks can start
// before its offsets are logged (the next batch, started while this one
// reduces and commits), and its reduce runs on their output. RunBatch is
// TakeMaps(StartMaps) then Reduce.
type PhasedRunner interface {
	Runner
	// StartMaps starts plan's map tasks in the background. With ahead,
	// they write nothing and call no hook until TakeMaps: the batch's
	// offsets are not logged yet.
	StartMaps(ctx context.Context, plan BatchPlan, ahead bool) *StartedMaps
	// TakeMaps waits for the map tasks, sets their malformed records
	// aside (for tasks started ahead) and returns their output.
	TakeMaps(ctx context.Context, plan BatchPlan, m *StartedMaps) (*MapOutput, error)
	// Reduce runs plan's reduce tasks over the map output.
	Reduce(ctx context.Context, plan BatchPlan, maps *MapOutput) (*BatchResult, error)
}

// StartedMaps are a batch's map tasks running in the background.
type StartedMaps struct {
	ahead  bool
	cancel context.CancelFunc
	done   chan struct{}
	maps   []*MapResult
	tasks  []MapTask
	err    error
	start  time.Time
	took   time.Duration

	// For runners outside this package (StartMapsWith).
	state    any
	drop     func()
	taken    atomic.Bool
	dropOnce sync.Once
}

// StartMapsWith returns map tasks that fn runs in the background, for a
// PhasedRunner outside this package (the cluster's): state is the
// runner's own (State), fn's error is Wait's. Cancel cancels fn's context,
// waits for it and then calls drop, unless Take was called first.
func StartMapsWith(ctx context.Context, ahead bool, state any, fn func(ctx context.Context) error, drop func()) *StartedMaps {
	ctx, cancel := context.WithCancel(ctx)
	m := &StartedMaps{ahead: ahead, cancel: cancel, done: make(chan struct{}), start: time.Now(), state: state, drop: drop}
	go func() {
		defer close(m.done)
		m.err = fn(ctx)
		m.took = time.Since(m.start)
	}()
	return m
}

// State is the value StartMapsWith was given.
func (m *StartedMaps) State() any { return m.state }

// Took is how long the tasks ran (valid once Wait returned).
func (m *StartedMaps) Took() time.Duration { return m.took }

// Wait waits for the tasks and returns their error; if ctx ends first it
// cancels them (Cancel) and returns ctx's error.
func (m *StartedMaps) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		m.Cancel()
		return ctx.Err()
	}
}

// Take marks the tasks' output as taken by the caller: Cancel no longer
// drops it (Reduce, or the MapOutput's Done, releases it).
func (m *StartedMaps) Take() { m.taken.Store(true) }

// Cancel stops the tasks and waits for them, then drops what they hold
// unless it was taken. It is idempotent.
func (m *StartedMaps) Cancel() {
	m.cancel()
	<-m.done
	if m.drop != nil && !m.taken.Load() {
		m.dropOnce.Do(m.drop)
	}
}

// MapOutput is a batch's map tasks' results, in task order, with the
// batch's metrics so far.
type MapOutput struct {
	Maps   []*MapResult
	Result BatchResult
	// State is a runner's own (the cluster's batch run), from TakeMaps to
	// Reduce.
	State any
	// Done, if set, releases what the runner holds for the batch (shuffle
	// data, executors). Reduce calls it; a caller that will not call
	// Reduce must. It is idempotent.
	Done func()
}

// Local runs tasks in this process, in parallel.
type Local struct {
	Env *Env
	// Parallelism bounds concurrent tasks; zero means GOMAXPROCS.
	Parallelism int
}

var _ PhasedRunner = (*Local)(nil)

func (l *Local) par() int {
	if l.Parallelism <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return l.Parallelism
}

// RunBatch runs every map task, then every reduce task.
func (l *Local) RunBatch(ctx context.Context, plan BatchPlan) (*BatchResult, error) {
	out, err := l.TakeMaps(ctx, plan, l.StartMaps(ctx, plan, false))
	if err != nil {
		return nil, err
	}
	return l.Reduce(ctx, plan, out)
}

// StartMaps starts plan's map tasks, at most Parallelism at once.
func (l *Local) StartMaps(ctx context.Context, plan BatchPlan, ahead bool) *StartedMaps {
	ctx, cancel := context.WithCancel(ctx)
	m := &StartedMaps{ahead: ahead, cancel: cancel, done: make(chan struct{}), maps: make([]*MapResult, len(plan.Splits)), start: time.Now()}
	for i, sp := range plan.Splits {
		m.tasks = append(m.tasks, MapTask{Batch: plan.Batch, Index: i, Split: sp, Late: plan.Watermark.Late, Partitions: plan.Partitions,
			BatchTimestampMs: plan.BatchTimestampMs, Manifest: plan.Manifest, Ahead: ahead})
	}
	go func() {
		defer close(m.done)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(l.par())
		for i, t := range m.tasks {
			g.Go(func() error {
				r, err := RunMap(gctx, l.Env, t)
				m.maps[i] = r
				return err
			})
		}
		m.err = g.Wait()
		m.took = time.Since(m.start)
	}()
	return m
}

// TakeMaps waits for m, finishes the tasks started ahead (their bad
// records and hooks, in task order) and returns the output.
func (l *Local) TakeMaps(ctx context.Context, plan BatchPlan, m *StartedMaps) (*MapOutput, error) {
	err := m.Wait(ctx)
	defer m.cancel()
	if err != nil {
		return nil, err
	}
	if m.ahead {
		for i, r := range m.maps {
			if err := FinishMap(ctx, l.Env, m.tasks[i], r); err != nil {
				return nil, err
			}
		}
	}
	out := &MapOutput{Maps: m.maps}
	for _, r := range m.maps {
		out.Result.add(r)
	}
	out.Result.MapDuration = m.took
	l.Env.hook("maps-done", plan.Batch)
	return out, nil
}

// Reduce runs every reduce task over the map output.
func (l *Local) Reduce(ctx context.Context, plan BatchPlan, out *MapOutput) (*BatchResult, error) {
	res := out.Result
	maps := out.Maps
	start := time.Now()
	res.Reduces = make([]*ReduceResult, plan.Partitions)
	g, gctx := errgroup.WithContext(ctx)
	// Reduce tasks of small batches mostly wait on writes (state deltas,
	// sink files, each fsynced): let every partition's run at once.
	g.SetLimit(max(l.par(), plan.Partitions))
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
				GatherBelow:  plan.GatherBelow, Manifest: plan.Manifest,
			}, partials, rows)
			res.Reduces[p] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, r := range res.Reduces {
		res.AddReduce(r)
	}
	res.ReduceDuration = time.Since(start)
	return &res, nil
}

// AddReduce folds a reduce task's metrics into the batch's: the rows it
// set aside and the duplicates it dropped (the runners call it once per
// reduce task).
func (r *BatchResult) AddReduce(rr *ReduceResult) {
	r.Malformed += rr.Malformed
	r.Duplicates += rr.Duplicates
	r.JoinUnmatched += rr.JoinUnmatched
}

// add folds a map task's metrics into the batch's.
func (r *BatchResult) add(m *MapResult) {
	r.InputRows += m.InputRows
	r.Malformed += m.Malformed
	r.Duplicates += m.Duplicates
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
