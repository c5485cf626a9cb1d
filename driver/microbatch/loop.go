package microbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/join"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/task"
)

// Clock tells the time and waits. The batch loop takes every time it
// decides with from Now, and waits only through Sleep.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends; it reports whether d passed.
	Sleep(ctx context.Context, d time.Duration) bool
}

// realClock is the wall clock (now: Config.Now).
type realClock struct{ now func() time.Time }

func (c realClock) Now() time.Time { return c.now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// loop is what the performing side of the batch loop keeps between
// actions (the decisions' state is the machine's).
type loop struct {
	ends []source.Offset // where the next batch starts; nil: Initial
	// lastBatchStart is the trigger start of the previous batch run by
	// this Run (zero before the first), for inputRowsPerSecond.
	lastBatchStart time.Time
	// latest is the source's latest offset when the next batch was
	// planned (Spark's latestOffset); nil for a re-run.
	latest source.Offset
	// planEnd is where the planned batch ends.
	planEnd source.Offset
}

// aheadBatch is the batch after the one in flight, planned while that one
// reduces and commits (Overlap), with its map tasks once started. Nothing
// of it is written until the step takes it (actTakeAhead) and its offsets
// are logged.
type aheadBatch struct {
	start, end, latest source.Offset
	// planNow is when it was planned (its batch time), started when its
	// trigger started.
	planNow, started time.Time
	entry            *checkpoint.OffsetEntry
	plan             task.BatchPlan
	maps             *task.StartedMaps
}

// drop stops a's map tasks, if any; nil is fine.
func (a *aheadBatch) drop() {
	if a != nil && a.maps != nil {
		a.maps.Cancel()
	}
}

// stepConfig is the step's view of the query's config.
func (q *Query) stepConfig() stepConfig {
	cfg := &q.cfg
	s := &cfg.Spec
	c := stepConfig{
		MaxAttempts:   cfg.MaxAttempts,
		RetryFor:      cfg.PlanRetryFor,
		Backoff:       cfg.RetryBackoff,
		IdlePoll:      cfg.IdlePoll,
		Interval:      s.Trigger.ProcessingTime.D(),
		Once:          s.Trigger.Once,
		AvailableNow:  s.Trigger.AvailableNow,
		Evicts:        q.layout != nil && q.layout.Bound != agg.NoBound,
		NoDataBatches: s.NoDataBatches(),
		NoDataAtOnce:  s.Trigger.NoDataBatchesAtOnce,
	}
	// The next batch is planned, and its map tasks run, while one reduces
	// and commits when it is due at once and its map tasks need nothing
	// logged (a join's snapshot is taken when a batch is planned).
	if _, phased := q.runner.(task.PhasedRunner); phased && cfg.Manifests == nil {
		c.Overlap = s.Trigger.AvailableNow || s.Trigger.ProcessingTime == 0 && !s.Trigger.Once
	}
	if w := s.Watermark; w != nil {
		c.Watermark, c.Delay, c.MaxJump = true, w.Delay.Micros(), w.MaxJumpOrDefault().Micros()
	}
	return c
}

// Run runs the query with runner until the trigger says stop (availableNow,
// once) or ctx is cancelled (processingTime and the default trigger). A
// batch in flight when ctx is cancelled is abandoned, never half-committed:
// its offsets are logged and the next start re-runs it.
//
// Run performs the actions the step (step.go) decides, and tells it how
// each went.
func (q *Query) Run(ctx context.Context, runner task.Runner) error {
	cfg := q.cfg
	clock := cfg.Clock
	q.runner = runner
	q.manifest = join.Ref{} // each run takes the dimension as it is when it starts
	last, commit, err := q.log.Latest(ctx)
	if err != nil {
		return err
	}
	res, err := checkpoint.Decide(last, commit)
	if err != nil {
		return err
	}
	lp := &loop{}
	q.cleaner = q.startCleaner(ctx)
	if res.NextBatch > 0 {
		// A first pass at start finishes what a stopped run's cleaner left,
		// even if no batch runs.
		q.cleaner.committed(res.NextBatch - 1)
	}
	defer func() {
		// A run that ends by itself (availableNow, once) lets the pass its
		// last commit asked for finish; a stop cancels it.
		q.cleaner.stop(ctx.Err() == nil)
		q.cleaner = nil
	}()
	if res.Last != nil {
		for _, r := range res.Last.Sources {
			lp.ends = append(lp.ends, r.End)
		}
		if k := cfg.Spec.Source.Kafka; k != nil && k.StartingOffsets != "" && res.Rerun == nil {
			cfg.Logger.Info("checkpoint has offsets: startingOffsets is ignored", "query", cfg.Spec.Name, "startingOffsets", k.StartingOffsets)
		}
	}

	m := newMachine(q.stepConfig())
	ev := event{Type: evStart, Batch: res.NextBatch, Watermark: res.Watermark, LateWatermark: res.LateWatermark}
	// The batch in flight: its entry, whether it re-runs a logged one,
	// when its trigger started, its result and when its commit started.
	var (
		entry       *checkpoint.OffsetEntry
		rerun       bool
		started     time.Time
		result      *task.BatchResult
		skipSink    bool
		attempts    int
		commitStart time.Time
		commitEntry *checkpoint.CommitEntry
		target      source.Offset
		planNow     time.Time
		// Overlap: the in-flight batch's plan and map tasks (started
		// ahead, or run by actRunMaps) and their output; the batch
		// planned ahead.
		plan    task.BatchPlan
		running *task.StartedMaps
		maps    *task.MapOutput
		ahead   *aheadBatch
	)
	defer func() {
		// Map tasks still running (a stop, a failure) are stopped and
		// waited for: nothing of them was written.
		ahead.drop()
		if running != nil {
			running.Cancel()
		}
		if maps != nil && maps.Done != nil {
			maps.Done() // taken but not reduced
		}
	}()
	if e := res.Rerun; e != nil {
		cfg.Logger.Info("re-running uncommitted batch as logged", "query", cfg.Spec.Name, "batch", e.BatchID)
		entry, rerun = e, true
		ev.Rerun, ev.Batch, ev.Watermark, ev.LateWatermark = true, e.BatchID, e.BatchWatermark, e.LateWatermark
	}
	failed := func(err error) event { return event{Type: evFailed, Kind: classify(err), Err: err} }
	// writeFailed classifies a failed log write: one that failed after a
	// stop is not retried (never start a log write after a stop).
	writeFailed := func(err error) event {
		ev := failed(err)
		if ctx.Err() != nil && ev.Kind == kindTransient {
			ev.Kind = kindCanceled
		}
		return ev
	}
	stopNow := event{Type: evStop, StopNow: true}
	for {
		ev.Now = clock.Now()
		a := m.step(ev)
		if a.ReportIdle && cfg.Idle != nil {
			cfg.Idle(a.Idle)
		}
		if a.DropAhead {
			ahead.drop()
			ahead = nil
		}
		switch a.Type {
		case actStop:
			return stopErr(ctx, a.Err)

		case actTarget:
			start, err := q.start(ctx, lp)
			if err == nil {
				if target, err = cfg.Source.Latest(ctx, start, clock.Now()); err != nil {
					err = fmt.Errorf("availableNow: read latest offsets: %w", err)
				}
			}
			if ev = (event{Type: evTarget}); err != nil {
				ev = failed(err)
			}

		case actPlan:
			if ctx.Err() != nil {
				ev = stopNow
				break
			}
			started = a.At
			if a.NoDataOnly {
				// A no-data batch run at once: it ends where it starts.
				start, err := q.start(ctx, lp)
				planNow, lp.planEnd = cfg.Now(), start
				if ev = (event{Type: evPlanned}); err != nil {
					ev = failed(err)
				}
				break
			}
			hasData, now, err := q.plan(ctx, lp, target, a.Batch)
			planNow = now
			if ev = (event{Type: evPlanned, HasData: hasData}); err != nil {
				ev = failed(err)
			}

		case actPrepare:
			manifest, err := q.snapshot(ctx, planNow)
			if err != nil {
				ev = failed(fmt.Errorf("plan batch %d: %w", a.Batch, err))
				break
			}
			entry, rerun = q.offsetEntry(a, planNow, lp.ends[0], lp.planEnd, manifest), false
			ev = event{Type: evPrepared}

		case actWriteOffsets:
			if a.Attempt == 1 {
				// The batch is in flight from here: a graceful stop
				// arriving now lets it commit (a stop that came before
				// has cancelled ctx, and nothing is written).
				q.hook("before-offsets", entry.BatchID)
			}
			if ctx.Err() != nil {
				ev = stopNow
				break
			}
			if err := q.log.WriteOffsets(ctx, entry); err != nil {
				ev = writeFailed(err)
				break
			}
			ev = event{Type: evWritten}

		case actRun:
			if a.Attempt == 1 {
				if rerun {
					started = clock.Now()
				} else {
					q.hook("after-offsets", entry.BatchID)
				}
			}
			var err error
			result, skipSink, err = q.attempt(ctx, entry, batchWatermarks(entry))
			attempts = a.Attempt
			if err != nil {
				ev = failed(err)
				break
			}
			q.hook("after-sink-commit", entry.BatchID)
			ev = event{Type: evRan, MaxEventTime: result.MaxEventTime, HasEventTime: result.HasEventTime}

		case actRunMaps:
			if a.Attempt == 1 {
				if rerun {
					started = clock.Now()
				} else {
					q.hook("after-offsets", entry.BatchID)
				}
			}
			attempts = a.Attempt
			pr := q.runner.(task.PhasedRunner)
			if running == nil {
				// Not started ahead (or a retry): start them now.
				var err error
				if plan, err = q.batchPlan(ctx, entry, batchWatermarks(entry)); err != nil {
					ev = failed(err)
					break
				}
				running = pr.StartMaps(ctx, plan, false)
			}
			var err error
			maps, err = pr.TakeMaps(ctx, plan, running)
			running = nil
			if err != nil {
				ev = failed(err)
				break
			}
			ev = event{Type: evMapsRan, MaxEventTime: maps.Result.MaxEventTime, HasEventTime: maps.Result.HasEventTime}

		case actPlanAhead:
			ev = event{Type: evPlanned}
			if len(entry.Sources) == 0 {
				break // a source-less entry: nothing to plan from
			}
			ahead = &aheadBatch{start: entry.Sources[0].End, started: a.At}
			hasData, err := q.planFrom(ctx, ahead, target, a.Batch)
			if ev = (event{Type: evPlanned, HasData: hasData}); err != nil {
				ev = failed(err)
			}

		case actStartAhead:
			ev = event{Type: evStarted}
			if err := q.startAhead(ctx, ahead, a); err != nil {
				ev = failed(err)
			}

		case actReduce:
			var err error
			result, skipSink, err = q.reduceAttempt(ctx, entry, plan, maps)
			maps = nil
			if err != nil {
				ev = failed(err)
				break
			}
			q.hook("after-sink-commit", entry.BatchID)
			ev = event{Type: evRan}

		case actTakeAhead:
			entry, rerun, running, plan = ahead.entry, false, ahead.maps, ahead.plan
			started, planNow = ahead.started, ahead.planNow
			lp.latest, lp.planEnd = ahead.latest, ahead.end
			ahead = nil
			ev = event{Type: evPrepared}

		case actCommit:
			if a.Attempt == 1 {
				q.watermarkMoved(entry, a, result)
				commitStart = clock.Now()
				commitEntry = q.commitEntry(entry, result, a.NextWatermark)
			}
			if ctx.Err() != nil {
				ev = stopNow
				break
			}
			if err := q.log.WriteCommit(ctx, commitEntry); err != nil {
				ev = writeFailed(err)
				break
			}
			ev = event{Type: evWritten}

		case actCheckOwn:
			mine, err := q.log.WrittenBy(ctx, a.Key, q.runID)
			mine = err == nil && mine
			if mine {
				cfg.Logger.Info("a retried log write found its own earlier attempt", "query", cfg.Spec.Name, "object", a.Key)
			}
			ev = event{Type: evOwn, Mine: mine}

		case actFinish:
			err := q.finish(ctx, lp, entry, result, rerun, skipSink, attempts, started, commitStart)
			ev = event{Type: evCommitted, Err: err}
			rerun = false

		case actWait:
			switch a.Op {
			case opPlan:
				cfg.Logger.Warn("cannot plan the next batch; waiting for the source", "query", cfg.Spec.Name, "batch", a.Batch, "retry_in", a.D, "err", a.Err)
				q.retrying(a.Batch, 0, a.Err)
			case opRun:
				cfg.Logger.Warn("batch failed; retrying from its logged offsets", "query", cfg.Spec.Name, "batch", a.Batch, "attempt", a.Attempt, "retry_in", a.D, "err", a.Err)
				q.retrying(a.Batch, a.Attempt, a.Err)
			case opOffsets, opCommit:
				cfg.Logger.Warn("cannot write the checkpoint log; retrying", "query", cfg.Spec.Name, "object", a.Key, "retry_in", a.D, "err", a.Err)
			}
			ev = event{Type: evElapsed}
			if !clock.Sleep(ctx, a.D) {
				ev = stopNow
			}

		default:
			return fmt.Errorf("scheduler: unknown action %v", a.Type)
		}
	}
}

// plan reads the source for batch: whether it has data past the last
// batch (the batch's end is kept in lp), and the time it planned at.
func (q *Query) plan(ctx context.Context, lp *loop, target source.Offset, batch ids.BatchID) (bool, time.Time, error) {
	start, err := q.start(ctx, lp)
	if err != nil {
		return false, q.cfg.Now(), err
	}
	latest, end, now, err := q.planRange(ctx, start, target, batch)
	if err != nil {
		return false, now, err
	}
	lp.latest, lp.planEnd = latest, end
	return !bytes.Equal(start, end), now, nil
}

// planRange reads the source for batch from start: the latest offset
// (target, availableNow's, when set), the batch's end, and the time it
// planned at.
func (q *Query) planRange(ctx context.Context, start, target source.Offset, batch ids.BatchID) (latest, end source.Offset, now time.Time, err error) {
	cfg := q.cfg
	now = cfg.Now()
	latest = target
	if latest == nil {
		if latest, err = cfg.Source.Latest(ctx, start, now); err != nil {
			return nil, nil, now, fmt.Errorf("plan batch %d: read latest offsets: %w", batch, err)
		}
	}
	if end, err = cfg.Source.Next(ctx, start, latest); err != nil {
		return nil, nil, now, fmt.Errorf("plan batch %d: %w", batch, err)
	}
	return latest, end, now, nil
}

// planFrom plans the batch after the one in flight, from a.start, while
// that one reduces and commits (Overlap); whether it has data.
func (q *Query) planFrom(ctx context.Context, a *aheadBatch, target source.Offset, batch ids.BatchID) (bool, error) {
	latest, end, now, err := q.planRange(ctx, a.start, target, batch)
	if err != nil {
		return false, err
	}
	a.latest, a.end, a.planNow = latest, end, now
	return !bytes.Equal(a.start, end), nil
}

// startAhead builds the entry of the batch planned ahead (logged only
// once the step takes it) and starts its map tasks, which write nothing
// until they are taken.
func (q *Query) startAhead(ctx context.Context, a *aheadBatch, act action) error {
	a.entry = q.offsetEntry(act, a.planNow, a.start, a.end, nil)
	var err error
	if a.plan, err = q.batchPlan(ctx, a.entry, batchWatermarks(a.entry)); err != nil {
		return err
	}
	a.maps = q.runner.(task.PhasedRunner).StartMaps(ctx, a.plan, true)
	return nil
}

// offsetEntry is the log entry of the batch act prepares or starts: its
// watermarks and no-data flag from the step, its range from start to end,
// planned at planNow, with the join snapshot it joins against (nil: no
// join). The batch in flight and the batch planned ahead are both made
// here.
func (q *Query) offsetEntry(act action, planNow time.Time, start, end source.Offset, manifest *checkpoint.ManifestRef) *checkpoint.OffsetEntry {
	return &checkpoint.OffsetEntry{
		Manifest:         manifest,
		BatchID:          act.Batch,
		BatchWatermark:   act.Watermark,
		LateWatermark:    act.LateWatermark,
		BatchTimestampMs: planNow.UnixMilli(),
		NoData:           act.NoData,
		Sources:          []checkpoint.SourceRange{{Start: start, End: end}},
		Conf:             q.conf,
		RunID:            q.runID,
	}
}

// batchWatermarks are the watermarks batch e was logged with.
func batchWatermarks(e *checkpoint.OffsetEntry) eventtime.Batch {
	return eventtime.Batch{Late: e.LateWatermark, Evict: e.BatchWatermark}
}

// watermarkMoved records (and logs) a batch that moved the watermark by
// more than watermark.maxJump.
func (q *Query) watermarkMoved(e *checkpoint.OffsetEntry, a action, res *task.BatchResult) {
	cfg := q.cfg
	if cfg.Spec.Watermark == nil {
		return
	}
	q.jumpMs = 0
	if !a.Jumped {
		return
	}
	q.jumps++
	q.jumpMs = a.JumpMicros / 1000
	cfg.Logger.Warn("watermark jumped: one batch moved it by more than watermark.maxJump; later rows before the new watermark are dropped as late",
		"query", cfg.Spec.Name, "batch", e.BatchID, "from", fmtWatermark(e.BatchWatermark), "to", fmtWatermark(a.NextWatermark),
		"jump", time.Duration(a.JumpMicros)*time.Microsecond, "maxJump", cfg.Spec.Watermark.MaxJumpOrDefault().D(), "max_event_time", fmtMicros(res.MaxEventTime))
}

// commitEntry is batch e's commits/N entry.
func (q *Query) commitEntry(e *checkpoint.OffsetEntry, res *task.BatchResult, nextWM eventtime.Watermark) *checkpoint.CommitEntry {
	ce := &checkpoint.CommitEntry{BatchID: e.BatchID, NextBatchWatermark: nextWM, RunID: q.runID}
	if q.layout != nil {
		// Which partitions' state files make version N+1: a delta (or a
		// snapshot) of an abandoned attempt for a partition not listed is
		// never loaded, and a listed one that is missing is an error.
		rec := &statestore.CommitRecord{Format: statestore.RecordFormat, Deltas: []ids.PartitionID{}}
		for _, r := range res.Reduces {
			if r.StateWrites >= 1 {
				rec.Deltas = append(rec.Deltas, r.Partition)
				if r.StateAttempt != "" {
					if rec.Attempts == nil {
						rec.Attempts = map[ids.PartitionID]string{}
					}
					rec.Attempts[r.Partition] = r.StateAttempt
				}
			}
			if r.StateWrites >= 2 {
				rec.Snapshots = append(rec.Snapshots, r.Partition)
			}
		}
		slices.Sort(rec.Deltas)
		slices.Sort(rec.Snapshots)
		ce.State = rec
	}
	return ce
}

// finish does what follows batch e's commit: the hook, the source's
// clean-up, the progress report and retention. The error stops the run
// (a state budget with onExceed: stop).
func (q *Query) finish(ctx context.Context, lp *loop, e *checkpoint.OffsetEntry, res *task.BatchResult, rerun, skipSink bool, attempts int, started, commitStart time.Time) error {
	cfg := q.cfg
	q.hook("after-commit", e.BatchID)
	if c, ok := cfg.Source.(source.Committer); ok && len(e.Sources) > 0 && !e.NoData {
		if err := c.Commit(ctx, e.Sources[0].End); err != nil {
			cfg.Logger.Warn("source clean-up after commit failed (the batch is committed)", "query", cfg.Spec.Name, "batch", e.BatchID, "err", err)
		}
	}
	if gc, ok := cfg.Source.(source.GroupCommitter); ok && len(e.Sources) > 0 {
		if err := gc.CommitToGroup(ctx, e.Sources[0].End); err != nil {
			cfg.Logger.Warn("commit offsets to group failed (display only; the checkpoint is the cursor)", "query", cfg.Spec.Name, "batch", e.BatchID, "err", err)
		}
	}
	done := cfg.Now()
	if len(e.Sources) > 0 {
		lp.ends = []source.Offset{e.Sources[0].End}
	}
	latest := lp.latest
	if rerun {
		latest = nil
	}
	inRate := progress.InputRowsPerSecond(res.InputRows, lp.lastBatchStart, started)
	lp.lastBatchStart = started
	p := q.report(ctx, e, res, latest, rerun, skipSink, attempts, inRate, started, commitStart, done)
	q.cleaner.committed(e.BatchID)
	if sb := p.StateBudget; sb != nil && sb.Exceeded && cfg.Spec.StateBudget.Stops() {
		return fmt.Errorf("query %s stopped after batch %d committed: %s: %w", cfg.Spec.Name, e.BatchID, sb.Message, ErrStateBudgetExceeded)
	}
	return nil
}

// stopErr turns the cancellation of ctx into a clean stop.
func stopErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

func (q *Query) retrying(batch ids.BatchID, attempt int, err error) {
	if q.cfg.OnRetry != nil {
		q.cfg.OnRetry(batch, attempt, err)
	}
}

func (q *Query) hook(point string, batch ids.BatchID) {
	if q.cfg.Hook != nil {
		q.cfg.Hook(point, batch)
	}
}

// start returns where the next batch starts.
func (q *Query) start(ctx context.Context, lp *loop) (source.Offset, error) {
	if lp.ends != nil {
		return lp.ends[0], nil
	}
	off, err := q.cfg.Source.Initial(ctx)
	if err != nil {
		return nil, fmt.Errorf("read starting offsets: %w", err)
	}
	lp.ends = []source.Offset{off}
	return off, nil
}
