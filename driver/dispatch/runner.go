package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// RunnerOptions configure a query's cluster runner.
type RunnerOptions struct {
	// QueryID is the checkpoint's query id.
	QueryID string
	// Spec is the validated query, defaults applied, as executors build it.
	Spec   query.Spec
	Logger *slog.Logger
	// Hook is the driver's fault-injection hook (point maps-done).
	Hook func(point string, batch ids.BatchID)
	// MapAttempts bounds the launches of one map task within a batch
	// (default 3), each on another executor while there is one.
	MapAttempts int
	// MinExecutors is how many executors must be registered before the
	// first batch runs (default 1); later batches need one.
	MinExecutors int
}

// Runner runs a query's batches on the driver's executors. It implements
// task.PhasedRunner: the batch loop may start the next batch's map tasks
// while one reduces and commits.
type Runner struct {
	d        *Driver
	opts     RunnerOptions
	specJSON []byte
	runID    string
	attempts atomic.Uint64

	mu       sync.Mutex
	started  bool
	owners   []ids.ExecutorID
	prepared map[ids.ExecutorID]bool
	stats    RunnerStats
}

// RunnerStats are a runner's totals since it started.
type RunnerStats struct {
	Batches        int64
	InputRows      int64
	ShuffleBytes   int64
	ShuffleRecords int64
	MapRetries     int64
}

var _ task.Runner = (*Runner)(nil)

// NewRunner returns a runner for one query on d's executors.
func (d *Driver) NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MapAttempts <= 0 {
		opts.MapAttempts = 3
	}
	if names := opts.Spec.SecretOptions(); len(names) > 0 && d.opts.TLS == nil && !d.opts.Insecure && !rpcauth.IsLoopback(d.opts.Listen) {
		return nil, fmt.Errorf("query %s has secret options (%s) and the driver listens on %s without TLS: executors would receive them in clear; add --tls-dir (or --tls-cert, --tls-key, --tls-ca)",
			opts.Spec.Name, strings.Join(names, ", "), d.opts.Listen)
	}
	js, err := json.Marshal(opts.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode query %s for executors: %w", opts.Spec.Name, err)
	}
	return &Runner{d: d, opts: opts, specJSON: js, runID: newRunID(), prepared: map[ids.ExecutorID]bool{}}, nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stats returns the runner's totals.
func (r *Runner) Stats() RunnerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Owners returns the partition owners of the last batch.
func (r *Runner) Owners() []ids.ExecutorID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ids.ExecutorID(nil), r.owners...)
}

// waitForExecutors waits until need executors take batches, ctx ends or
// the batch loop accepts a graceful stop (task.Draining): a batch still
// waiting has run nothing, and its logged offsets are re-run by the next
// run, so letting it "finish" would only hold the stop until its timeout.
func (r *Runner) waitForExecutors(ctx context.Context, batch ids.BatchID, need int) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	abandoned := make(chan struct{})
	if draining := task.Draining(ctx); draining != nil {
		go func() {
			select {
			case <-draining:
				close(abandoned)
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	_, err := r.d.Members.WaitForLive(wctx, need)
	select {
	case <-abandoned:
		if ctx.Err() == nil {
			return fmt.Errorf("batch %d: stopped while waiting for executors (nothing ran; the next run re-runs its logged offsets): %w", batch, context.Canceled)
		}
	default:
	}
	return err
}

// batchRun is one batch on the executors, from StartMaps to Reduce.
type batchRun struct {
	r           *Runner
	plan        task.BatchPlan
	ahead       bool
	hold        *BatchHold
	owners      []ids.ExecutorID
	byID        map[ids.ExecutorID]Member
	protoOwners []*sluicepb.PartitionOwner
	log         *slog.Logger

	// parent is StartMaps' context; ctx, derived from it, is the batch's
	// and is cancelled (with the reason) when an owner leaves.
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc

	// The map tasks' results: the accepted attempt of each, the executor
	// that ran it, its metrics.
	accepted []uint64
	ranOn    []ids.ExecutorID
	metrics  []*sluicepb.MapMetrics

	finishOnce sync.Once
}

var _ task.PhasedRunner = (*Runner)(nil)

// RunBatch runs the plan's map tasks on the live executors, shuffles their
// partials to the partitions' owners and runs a reduce task per partition
// on its owner. Losing an owner fails the batch (the scheduler retries it
// whole, and the next call assigns partitions anew).
func (r *Runner) RunBatch(ctx context.Context, plan task.BatchPlan) (*task.BatchResult, error) {
	out, err := r.TakeMaps(ctx, plan, r.StartMaps(ctx, plan, false))
	if err != nil {
		return nil, err
	}
	return r.Reduce(ctx, plan, out)
}

// StartMaps assigns the plan's partitions to the live executors and runs
// its map tasks in the background (see RunBatch). With ahead (the batch
// after the one reducing, not logged yet) the executors push the
// partials but set nothing aside and call no hook until TakeMaps has
// them finish the tasks.
func (r *Runner) StartMaps(ctx context.Context, plan task.BatchPlan, ahead bool) *task.StartedMaps {
	b := &batchRun{r: r, plan: plan, ahead: ahead, byID: map[ids.ExecutorID]Member{}, parent: ctx,
		log: r.opts.Logger.With("query", r.opts.Spec.Name, "batch", plan.Batch)}
	b.ctx, b.cancel = context.WithCancelCause(ctx)
	return task.StartMapsWith(b.ctx, ahead, b, b.start, b.finish)
}

// TakeMaps waits for the map tasks; those run ahead are finished on their
// executors now that the batch is logged.
func (r *Runner) TakeMaps(ctx context.Context, plan task.BatchPlan, m *task.StartedMaps) (*task.MapOutput, error) {
	b := m.State().(*batchRun)
	if err := m.Wait(ctx); err != nil {
		b.finish()
		return nil, b.fail(err)
	}
	m.Take()
	if b.ahead {
		if err := b.finishAhead(); err != nil {
			b.finish()
			return nil, b.fail(err)
		}
	}
	out := &task.MapOutput{State: b, Done: b.finish}
	res := &out.Result
	for i, m := range b.metrics {
		res.AddMap(&task.MapResult{
			Index: i, InputRows: m.InputRows, Malformed: m.Malformed, DroppedByWatermark: m.DroppedByWatermark, TooFarAhead: m.TooFarAhead, JoinUnmatched: m.JoinUnmatched,
			Duplicates:   m.Duplicates,
			MinEventTime: m.MinEventTimeUs, MaxEventTime: m.MaxEventTimeUs, HasEventTime: m.HasEventTime,
		})
		res.ShuffleBytes += m.ShuffleBytes
	}
	res.MapDuration = m.Took()
	if r.opts.Hook != nil {
		r.opts.Hook("maps-done", plan.Batch)
	}
	return out, nil
}

// Reduce runs a reduce task per partition on its owner over the map
// tasks' accepted attempts, then releases the batch's shuffle data.
func (r *Runner) Reduce(ctx context.Context, plan task.BatchPlan, out *task.MapOutput) (*task.BatchResult, error) {
	b := out.State.(*batchRun)
	defer b.finish()
	stop := context.AfterFunc(ctx, func() { b.cancel(context.Cause(ctx)) })
	defer stop()
	res := out.Result
	start := time.Now()
	var err error
	// plan is the batch's as the sink decided it once the maps ran (what
	// to gather, whether to skip the sink).
	if res.Reduces, err = b.runReduces(b.ctx, plan, b.accepted); err != nil {
		return nil, b.fail(err)
	}
	for _, rr := range res.Reduces {
		res.AddReduce(rr)
	}
	res.ReduceDuration = time.Since(start)
	var records int64
	for _, m := range b.metrics {
		records += m.ShuffleRecords
	}
	b.log.Debug("batch ran on executors", "maps", len(plan.Splits), "ahead", b.ahead, "shuffleBytes", res.ShuffleBytes, "shuffleRecords", records)
	r.mu.Lock()
	r.stats.Batches++
	r.stats.InputRows += res.InputRows
	r.stats.ShuffleBytes += res.ShuffleBytes
	r.stats.ShuffleRecords += records
	r.mu.Unlock()
	return &res, nil
}

// start waits for executors, assigns the partitions and runs the map
// tasks (StartMaps' background work).
func (b *batchRun) start(ctx context.Context) error {
	r, plan := b.r, b.plan
	r.mu.Lock()
	need := 1
	if !r.started {
		need = max(1, r.opts.MinExecutors)
	}
	r.mu.Unlock()
	if have := len(r.d.Members.Live()); have < need {
		r.opts.Logger.Info("waiting for executors to register", "query", r.opts.Spec.Name, "batch", plan.Batch, "driver", r.d.Addr(), "registered", have, "need", need)
		if err := r.waitForExecutors(ctx, plan.Batch, need); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	b.hold = r.d.Members.AcquireLive()
	if len(b.hold.Members) == 0 {
		return fmt.Errorf("batch %d: no executor available", plan.Batch)
	}
	var execs []ids.ExecutorID
	for _, m := range b.hold.Members {
		b.byID[m.ID] = m
		execs = append(execs, m.ID)
	}
	r.mu.Lock()
	prev := r.owners
	b.owners = Assign(prev, execs, plan.Partitions)
	r.owners = b.owners
	r.mu.Unlock()
	if moved := Moves(prev, b.owners); moved > 0 {
		b.log.Info("partitions assigned", "executors", len(execs), "moved", moved, "owners", describeOwners(b.owners))
	}
	for _, id := range b.owners {
		m := b.byID[id]
		b.protoOwners = append(b.protoOwners, &sluicepb.PartitionOwner{ExecutorId: string(m.ID), Address: m.Address})
	}
	b.watchOwners(b.ctx, b.cancel)
	if err := b.prepareAll(ctx); err != nil {
		return err
	}
	return b.runMaps(ctx)
}

// fail prefers the reason the batch was aborted (an owner left) over the
// cancellation it caused in the tasks.
func (b *batchRun) fail(err error) error {
	if b.parent.Err() == nil && b.ctx.Err() != nil {
		if cause := context.Cause(b.ctx); cause != context.Canceled {
			return cause
		}
	}
	return err
}

// finishAhead has each executor finish the map attempts it ran ahead, in
// task order.
func (b *batchRun) finishAhead() error {
	byExec := map[ids.ExecutorID][]uint64{}
	var execs []ids.ExecutorID
	for i, id := range b.ranOn {
		if byExec[id] == nil {
			execs = append(execs, id)
		}
		byExec[id] = append(byExec[id], b.accepted[i])
	}
	g, gctx := errgroup.WithContext(b.ctx)
	for _, id := range execs {
		m := b.byID[id]
		req := &sluicepb.FinishMapTasksRequest{QueryId: b.r.opts.QueryID, RunId: b.r.runID, Batch: int64(b.plan.Batch), Attempts: byExec[id]}
		g.Go(func() error {
			err := b.call(gctx, m, func(ctx context.Context, c sluicepb.ExecutorServiceClient) error {
				_, err := c.FinishMapTasks(ctx, req)
				return err
			})
			if err != nil {
				return fmt.Errorf("batch %d: finish the map tasks run ahead on executor %s: %w", b.plan.Batch, id, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// finish releases what the batch holds: its shuffle data on the
// executors, its context, its hold on them. It is idempotent.
func (b *batchRun) finish() {
	b.finishOnce.Do(func() {
		if b.hold != nil {
			b.release()
		}
		b.cancel(nil)
		if b.hold != nil {
			b.hold.Release()
		}
	})
}

func describeOwners(owners []ids.ExecutorID) string {
	parts := map[ids.ExecutorID][]string{}
	var execs []ids.ExecutorID
	for p, id := range owners {
		if parts[id] == nil {
			execs = append(execs, id)
		}
		parts[id] = append(parts[id], fmt.Sprint(p))
	}
	sort.Slice(execs, func(i, j int) bool { return execs[i] < execs[j] })
	var b strings.Builder
	for i, id := range execs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:[%s]", id, strings.Join(parts[id], ","))
	}
	return b.String()
}

// watchOwners aborts the batch when an owner of its partitions leaves the
// membership (a failed call, missed heartbeats): every map task pushes to
// it and its reduces cannot run, so waiting for them is pointless (and a
// push to a hung owner would wait forever).
func (b *batchRun) watchOwners(ctx context.Context, abort context.CancelCauseFunc) {
	seen := map[ids.ExecutorID]bool{}
	for _, id := range b.owners {
		if seen[id] {
			continue
		}
		seen[id] = true
		gone := b.r.d.Members.Gone(id)
		go func() {
			select {
			case <-gone:
				abort(fmt.Errorf("batch %d: executor %s, owner of partitions %v, left the pool; the batch needs a new assignment", b.plan.Batch, id, b.ownsPartitions(id)))
			case <-ctx.Done():
			}
		}()
	}
}

// lostError says an executor was lost during a call.
type lostError struct {
	id  ids.ExecutorID
	err error
}

func (e *lostError) Error() string { return fmt.Sprintf("executor %s lost: %v", e.id, e.err) }
func (e *lostError) Unwrap() error { return e.err }

// call runs fn against m's ExecutorService; it is cancelled when m leaves
// the membership, and a transport failure removes m (it is lost).
func (b *batchRun) call(ctx context.Context, m Member, fn func(context.Context, sluicepb.ExecutorServiceClient) error) error {
	client, err := b.r.d.executorClient(m)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var left atomic.Bool
	stop := make(chan struct{})
	gone := b.r.d.Members.Gone(m.ID)
	go func() {
		select {
		case <-gone:
			left.Store(true)
			cancel()
		case <-stop:
		}
	}()
	// A domain error (data loss, corrupt state, ...) comes back as the
	// sentinel it matched on the executor.
	err = wire.DecodeDomain(fn(cctx, client), m.ID)
	close(stop)
	switch {
	case err == nil || ctx.Err() != nil:
		return err
	case left.Load():
		return &lostError{id: m.ID, err: errors.New("it left the membership during the call")}
	case status.Code(err) == codes.Unavailable && wire.ShuffleFailureOf(err) == nil:
		b.r.d.Members.Remove(m.ID, "call failed: "+status.Convert(err).Message())
		return &lostError{id: m.ID, err: err}
	}
	return err
}

func (b *batchRun) prepareAll(ctx context.Context) error {
	b.r.mu.Lock()
	for id := range b.r.prepared {
		if _, ok := b.byID[id]; !ok && !b.r.d.Members.IsMember(id) {
			delete(b.r.prepared, id)
		}
	}
	b.r.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range b.hold.Members {
		b.r.mu.Lock()
		done := b.r.prepared[m.ID]
		b.r.mu.Unlock()
		if done {
			continue
		}
		g.Go(func() error { return b.prepare(gctx, m) })
	}
	return g.Wait()
}

func (b *batchRun) prepare(ctx context.Context, m Member) error {
	req := &sluicepb.PrepareQueryRequest{QueryId: b.r.opts.QueryID, RunId: b.r.runID, SpecJson: b.r.specJSON}
	err := b.call(ctx, m, func(ctx context.Context, c sluicepb.ExecutorServiceClient) error {
		_, err := c.PrepareQuery(ctx, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("batch %d: prepare query on executor %s (%s): %w", b.plan.Batch, m.ID, m.Address, err)
	}
	b.r.mu.Lock()
	b.r.prepared[m.ID] = true
	b.r.mu.Unlock()
	return nil
}

func (b *batchRun) ownsPartitions(id ids.ExecutorID) []ids.PartitionID {
	var ps []ids.PartitionID
	for p := range ids.PartitionID(len(b.owners)) {
		if b.owners[p] == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// pick returns the executor for map task i's next launch: a member not
// tried yet, else any member still registered.
func (b *batchRun) pick(i int, tried map[ids.ExecutorID]bool) (Member, bool) {
	var fresh, any []Member
	for _, m := range b.hold.Members {
		if !b.r.d.Members.IsMember(m.ID) {
			continue
		}
		any = append(any, m)
		if !tried[m.ID] {
			fresh = append(fresh, m)
		}
	}
	c := fresh
	if len(c) == 0 {
		c = any
	}
	if len(c) == 0 {
		return Member{}, false
	}
	return c[(i+len(tried))%len(c)], true
}

func (b *batchRun) runMaps(ctx context.Context) error {
	n := len(b.plan.Splits)
	b.accepted, b.ranOn, b.metrics = make([]uint64, n), make([]ids.ExecutorID, n), make([]*sluicepb.MapMetrics, n)
	g, gctx := errgroup.WithContext(ctx)
	for i := range n {
		g.Go(func() error {
			a, on, m, err := b.runMap(gctx, i)
			b.accepted[i], b.ranOn[i], b.metrics[i] = a, on, m
			return err
		})
	}
	return g.Wait()
}

// runMap launches map task i until an attempt succeeds. A task whose push
// to an owner failed, or whose executor owned partitions and was lost,
// fails the batch: its partitions need a new owner.
func (b *batchRun) runMap(ctx context.Context, i int) (uint64, ids.ExecutorID, *sluicepb.MapMetrics, error) {
	sp := b.plan.Splits[i]
	tried := map[ids.ExecutorID]bool{}
	var lastErr error
	for launch := 0; launch < b.r.opts.MapAttempts; launch++ {
		m, ok := b.pick(i, tried)
		if !ok {
			break
		}
		tried[m.ID] = true
		attempt := b.r.attempts.Add(1)
		req := &sluicepb.RunMapTaskRequest{
			QueryId: b.r.opts.QueryID, RunId: b.r.runID, Batch: int64(b.plan.Batch), MapIndex: int32(i), Attempt: attempt,
			Split:           &sluicepb.Split{Id: sp.ID, Desc: sp.Desc},
			LateWatermarkUs: int64(b.plan.Watermark.Late), Partitions: int32(b.plan.Partitions), Owners: b.protoOwners,
			BatchTimestampMs: b.plan.BatchTimestampMs,
			ManifestId:       b.plan.Manifest.ID, ManifestHash: b.plan.Manifest.Hash,
			Ahead: b.ahead,
		}
		var resp *sluicepb.RunMapTaskResponse
		err := b.call(ctx, m, func(ctx context.Context, c sluicepb.ExecutorServiceClient) error {
			var err error
			resp, err = c.RunMapTask(ctx, req)
			return err
		})
		if err == nil {
			if launch > 0 {
				b.r.mu.Lock()
				b.r.stats.MapRetries += int64(launch)
				b.r.mu.Unlock()
			}
			return attempt, m.ID, resp.GetMetrics(), nil
		}
		if ctx.Err() != nil {
			return 0, "", nil, ctx.Err()
		}
		if !wire.Elsewhere(err) {
			// Data loss, a corrupt checkpoint...: every executor would
			// find the same; the scheduler decides, as in one process.
			return 0, "", nil, fmt.Errorf("batch %d: map task %d (split %s) on executor %s: %w", b.plan.Batch, i, sp.ID, m.ID, err)
		}
		if f := wire.ShuffleFailureOf(err); f != nil {
			b.r.d.Members.Remove(ids.ExecutorID(f.ExecutorId), fmt.Sprintf("map task %d of batch %d could not push partials to it: %s", i, b.plan.Batch, status.Convert(err).Message()))
			return 0, "", nil, fmt.Errorf("batch %d: map task %d on executor %s: owner %s (%s) unreachable; the batch needs a new assignment: %w",
				b.plan.Batch, i, m.ID, f.ExecutorId, f.Address, err)
		}
		var lost *lostError
		if errors.As(err, &lost) {
			if ps := b.ownsPartitions(m.ID); len(ps) > 0 {
				return 0, "", nil, fmt.Errorf("batch %d: executor %s, owner of partitions %v, lost during map task %d; the batch needs a new assignment: %w",
					b.plan.Batch, m.ID, ps, i, err)
			}
		}
		if status.Code(err) == codes.FailedPrecondition {
			b.r.mu.Lock()
			delete(b.r.prepared, m.ID)
			b.r.mu.Unlock()
			if perr := b.prepare(ctx, m); perr != nil {
				err = perr
			}
		}
		b.log.Warn("map task failed; retrying on another executor", "map", i, "split", sp.ID, "executor", m.ID, "attempt", attempt, "err", err)
		lastErr = err
	}
	if lastErr == nil {
		lastErr = errors.New("no executor left to run it")
	}
	return 0, "", nil, fmt.Errorf("batch %d: map task %d (split %s) failed %d times: %w", b.plan.Batch, i, sp.ID, len(tried), lastErr)
}

func (b *batchRun) runReduces(ctx context.Context, plan task.BatchPlan, accepted []uint64) ([]*task.ReduceResult, error) {
	out := make([]*task.ReduceResult, plan.Partitions)
	g, gctx := errgroup.WithContext(ctx)
	for p := range ids.PartitionID(plan.Partitions) {
		m := b.byID[b.owners[p]]
		g.Go(func() error {
			req := &sluicepb.RunReduceTaskRequest{
				QueryId: b.r.opts.QueryID, RunId: b.r.runID, Batch: int64(plan.Batch), Partition: int32(p),
				LateWatermarkUs: int64(plan.Watermark.Late), EvictWatermarkUs: int64(plan.Watermark.Evict),
				SkipSink: plan.SkipSink, MapAttempts: accepted, GatherBelowBytes: plan.GatherBelow,
				ManifestId: plan.Manifest.ID, ManifestHash: plan.Manifest.Hash,
			}
			var resp *sluicepb.RunReduceTaskResponse
			var rows []byte
			err := b.call(gctx, m, func(ctx context.Context, c sluicepb.ExecutorServiceClient) error {
				resp, rows = nil, nil
				stream, err := c.RunReduceTask(ctx, req)
				if err != nil {
					return err
				}
				for {
					msg, err := stream.Recv()
					if err != nil {
						if err == io.EOF {
							err = status.Error(codes.Unavailable, "reduce task result ended before its last message")
						}
						return err
					}
					rows = append(rows, msg.Rows...)
					if msg.Last {
						resp = msg
						return nil
					}
				}
			})
			if err != nil {
				return fmt.Errorf("batch %d: reduce partition %d on executor %s: %w", plan.Batch, p, m.ID, err)
			}
			rr := &task.ReduceResult{
				Partition: p, Files: resp.Files, NumOutputRows: resp.NumOutputRows, StateRows: resp.StateRows,
				Updated: resp.Updated, Removed: resp.Removed, MemoryBytes: resp.MemoryBytes, StateWrites: int(resp.StateWrites),
				StateAttempt: statestore.AttemptID(req.RunId, plan.Batch, req.MapAttempts),
				Gathered:     resp.Gathered,
				Malformed:    resp.Malformed, Duplicates: resp.Duplicates, JoinUnmatched: resp.JoinUnmatched,
			}
			if len(rows) > 0 {
				if rr.Rows, err = wire.DecodeRows(rows, make([]row.Row, 0, resp.NumOutputRows)); err != nil {
					return fmt.Errorf("batch %d: reduce partition %d: %w", plan.Batch, p, err)
				}
			}
			out[p] = rr
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// release drops the batch's shuffle data on every executor still there,
// before RunBatch returns, so that a retry's data is never dropped by a
// late release.
func (b *batchRun) release() {
	if len(b.plan.Splits) == 0 {
		return // no map task, nothing pushed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	req := &sluicepb.ReleaseBatchRequest{QueryId: b.r.opts.QueryID, RunId: b.r.runID, Batch: int64(b.plan.Batch)}
	for _, o := range b.protoOwners {
		req.PartitionOwners = append(req.PartitionOwners, o.ExecutorId)
	}
	for _, m := range b.hold.Members {
		if !b.r.d.Members.IsMember(m.ID) {
			continue
		}
		wg.Go(func() {
			c, err := b.r.d.executorClient(m)
			if err == nil {
				_, err = c.ReleaseBatch(ctx, req)
			}
			if err != nil {
				b.log.Debug("release batch on executor failed", "executor", m.ID, "err", err)
			}
		})
	}
	wg.Wait()
}
