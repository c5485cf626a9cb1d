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

// Signal is a decision from outside the loop that changes its course. It
// enters the step as an event, like everything else that happens; the
// driver service is its only sender.
type Signal struct {
	Kind SignalKind
	// Timeout (Stop, Shutdown, Pause) bounds how long the batch in flight
	// may take to commit before it is abandoned; zero is
	// Config.StopTimeout.
	Timeout time.Duration
}

// SignalKind says what a Signal asks.
type SignalKind int

const (
	// Stop (an operator's stop): the batch in flight commits, within the
	// timeout, then the run ends; nothing new is planned.
	Stop SignalKind = iota + 1
	// StopNow abandons the batch in flight at once: nothing more of it is
	// written, and the next run re-runs its logged offsets.
	StopNow
	// Shutdown: the driver is shutting down; as Stop.
	Shutdown
	// Pause: as Stop (the run ends paused).
	Pause
	// LeaseLost: another driver holds the lease; the run stops at once,
	// writing nothing more, and returns ErrLeaseLost.
	LeaseLost
)

var signalNames = [...]string{"", "stop", "stop-now", "shutdown", "pause", "lease-lost"}

func (k SignalKind) String() string {
	if int(k) < len(signalNames) {
		return signalNames[k]
	}
	return fmt.Sprintf("signal(%d)", int(k))
}

// event is the step's input for the signal.
func (s Signal) event() event {
	switch s.Kind {
	case StopNow:
		return event{Type: evStop, StopNow: true}
	case Shutdown:
		return event{Type: evStop, Shutdown: true, Timeout: s.Timeout}
	case Pause:
		return event{Type: evPause, Timeout: s.Timeout}
	case LeaseLost:
		return event{Type: evLeaseLost}
	}
	return event{Type: evStop, Timeout: s.Timeout}
}

// inflight is the batch in flight, from its plan to its commit: what the
// performing side keeps of it between actions (the decisions' state is
// the machine's).
type inflight struct {
	entry *checkpoint.OffsetEntry
	rerun bool // it re-runs a logged batch
	// started is when its trigger started; planNow when it was planned
	// (its batch time); commitStart when its commit started.
	started, planNow, commitStart time.Time
	result                        *task.BatchResult
	skipSink                      bool // the sink already had its output
	attempts                      int
	commitEntry                   *checkpoint.CommitEntry
	// Overlap: its plan and map tasks (started ahead, or by actRunMaps)
	// and their output.
	plan    task.BatchPlan
	running *task.StartedMaps
	maps    *task.MapOutput
}

// loop is what the performing side of the batch loop keeps between
// actions.
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
	// target is availableNow's end (nil otherwise, or before it is read).
	target source.Offset
	cur    inflight
	ahead  *aheadBatch
	// draining is closed when the step accepts a graceful stop
	// (task.Draining); abandon when the time it gave the batch in flight
	// is up.
	draining    chan struct{}
	drainClosed bool
	abandon     <-chan struct{}
	abandonAt   time.Time
}

// release stops what is still running when the run ends (a stop, a
// failure): nothing of it was written.
func (lp *loop) release() {
	lp.ahead.drop()
	if lp.cur.running != nil {
		lp.cur.running.Cancel()
	}
	if m := lp.cur.maps; m != nil && m.Done != nil {
		m.Done() // taken but not reduced
	}
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
		MaxAttempts:  cfg.MaxAttempts,
		RetryFor:     cfg.PlanRetryFor,
		Backoff:      cfg.RetryBackoff,
		IdlePoll:     cfg.IdlePoll,
		Interval:     s.Trigger.ProcessingTime.D(),
		Once:         s.Trigger.Once,
		AvailableNow: s.Trigger.AvailableNow,
		// A dedup's state leaves by the watermark in every output mode
		// (Spark's shouldRunAnotherBatch for it).
		Evicts:        q.layout != nil && q.layout.Bound != agg.NoBound || q.qplan.Dedup != nil,
		NoDataBatches: s.NoDataBatches(),
		NoDataAtOnce:  s.Trigger.NoDataBatchesAtOnce,
		StopTimeout:   cfg.StopTimeout,
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
// once), a signal stops it, or ctx ends. A stop abandons nothing
// half-committed: a batch in flight either commits or is abandoned with
// its offsets logged, and the next start re-runs it. Ending ctx is
// StopNow. A stop returns nil, except LeaseLost (ErrLeaseLost).
//
// Run is the only place a batch's fate is decided: the step (step.go)
// decides from what happened, signals included, and Run performs its
// actions, each in a goroutine of its own so a signal is stepped while
// the action runs; an action the step stops is cancelled and waited for
// before Run returns. What the loop did leaves through Config.Observer.
func (q *Query) Run(ctx context.Context, runner task.Runner, signals <-chan Signal) error {
	cfg := q.cfg
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
	lp := &loop{draining: make(chan struct{})}
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
	// What the run starts to outlive an action (a batch's map tasks, a
	// graceful stop's deadline) runs on runCtx, which ends with Run.
	runCtx, endRun := context.WithCancel(ctx)
	defer endRun()
	defer lp.release()

	m := newMachine(q.stepConfig())
	ev := event{Type: evStart, Batch: res.NextBatch, Watermark: res.Watermark, LateWatermark: res.LateWatermark}
	if e := res.Rerun; e != nil {
		cfg.Logger.Info("re-running uncommitted batch as logged", "query", cfg.Spec.Name, "batch", e.BatchID)
		lp.cur = inflight{entry: e, rerun: true}
		ev.Rerun, ev.Batch, ev.Watermark, ev.LateWatermark = true, e.BatchID, e.BatchWatermark, e.LateWatermark
	}
	for {
		ev.Now = cfg.Clock.Now()
		a := m.step(ev)
		for {
			q.observe(a)
			if a.Type == actStop {
				q.stopping(lp, a)
				return q.stopErr(ctx, a)
			}
			if a.DropAhead {
				lp.ahead.drop()
				lp.ahead = nil
			}
			var stop *action
			ev, stop = q.perform(ctx, runCtx, m, lp, a, signals)
			if stop == nil {
				break
			}
			a = *stop
		}
	}
}

// perform does a in a goroutine and returns its outcome, stepping every
// signal that arrives meanwhile (and the end of ctx, and a graceful stop's
// deadline); if the step stops the run, the action is cancelled and
// waited for, and the stop returned instead. runCtx is the run's context
// (see act).
func (q *Query) perform(ctx, runCtx context.Context, m *machine, lp *loop, a action, signals <-chan Signal) (event, *action) {
	actx, cancel := context.WithCancel(task.WithDraining(ctx, lp.draining))
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		// A panic in the action (a fault hook's simulated crash, a bug)
		// is raised again in Run's goroutine, where it would have been.
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{panicked: true, panic: p}
			}
		}()
		done <- outcome{ev: q.act(actx, runCtx, lp, a)}
	}()
	wait := func() {
		if out := <-done; out.panicked {
			panic(out.panic)
		}
	}
	ctxDone := ctx.Done()
	for {
		var ev event
		select {
		case out := <-done:
			if out.panicked {
				panic(out.panic)
			}
			return out.ev, nil
		case s, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			q.cfg.Logger.Info("signal", "query", q.cfg.Spec.Name, "signal", s.Kind.String())
			ev = s.event()
		case <-ctxDone:
			ctxDone = nil
			ev = event{Type: evStop, StopNow: true}
		case <-lp.abandon:
			lp.abandon, lp.abandonAt = nil, time.Time{}
			ev = event{Type: evAbandon}
		}
		ev.Now = q.cfg.Clock.Now()
		next := m.step(ev)
		switch next.Type {
		case actContinue:
			q.draining(runCtx, lp, next)
		case actStop:
			cancel()
			wait()
			return event{}, &next
		default:
			// The step answers a signal with a stop or with going on.
			cancel()
			wait()
			err := fmt.Errorf("microbatch: step answered %s with %s", ev.Type, next.Type)
			return event{}, &action{Type: actStop, Reason: stopFailed, Err: err}
		}
	}
}

// outcome is what an action's goroutine hands back: its event, or the
// panic it raised.
type outcome struct {
	ev       event
	panicked bool
	panic    any
}

// draining tells the runner a graceful stop was accepted (task.Draining)
// and arms its deadline, when the step set one.
func (q *Query) draining(dctx context.Context, lp *loop, a action) {
	if !lp.drainClosed {
		lp.drainClosed = true
		close(lp.draining)
	}
	if a.AbandonAt.IsZero() || a.AbandonAt.Equal(lp.abandonAt) {
		return
	}
	ch := make(chan struct{})
	lp.abandon, lp.abandonAt = ch, a.AbandonAt
	d := a.AbandonAt.Sub(q.cfg.Clock.Now())
	go func() {
		if q.cfg.Clock.Sleep(dctx, d) {
			close(ch)
		}
	}()
}

// observe tells the observer what a says happened before it is done.
func (q *Query) observe(a action) {
	obs := q.cfg.Observer
	if a.ReportIdle {
		obs.Idle(a.Idle)
	}
	switch a.Type {
	case actRun, actRunMaps:
		if a.Attempt == 1 {
			obs.BatchStarted(a.Batch)
		}
	case actWait:
		switch a.Op {
		case opPlan:
			q.cfg.Logger.Warn("cannot plan the next batch; waiting for the source", "query", q.cfg.Spec.Name, "batch", a.Batch, "retry_in", a.D, "err", a.Err)
			obs.Retrying(a.Batch, 0, a.Err)
		case opRun:
			q.cfg.Logger.Warn("batch failed; retrying from its logged offsets", "query", q.cfg.Spec.Name, "batch", a.Batch, "attempt", a.Attempt, "retry_in", a.D, "err", a.Err)
			obs.Retrying(a.Batch, a.Attempt, a.Err)
		case opOffsets, opCommit:
			q.cfg.Logger.Warn("cannot write the checkpoint log; retrying", "query", q.cfg.Spec.Name, "object", a.Key, "retry_in", a.D, "err", a.Err)
		}
	}
}

// stopping logs a stop that abandons the batch in flight and drops the
// batch planned ahead.
func (q *Query) stopping(lp *loop, a action) {
	if a.DropAhead {
		lp.ahead.drop()
		lp.ahead = nil
	}
	if a.Abandoned && lp.cur.entry != nil {
		q.cfg.Logger.Info("batch in flight abandoned: its logged offsets are re-run by the next run", "query", q.cfg.Spec.Name, "batch", lp.cur.entry.BatchID, "reason", a.Reason.String())
	}
}

// stopErr is what Run returns for a stop: nil for a clean one.
func (q *Query) stopErr(ctx context.Context, a action) error {
	err := a.Err
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// act performs a (in its own goroutine; ctx ends when the step stops the
// run) and returns what happened. runCtx is the run's: what an action
// starts to outlive it (a batch's map tasks, whose batch the runner keeps
// until its reduce) runs on it, and ends with Run.
func (q *Query) act(ctx, runCtx context.Context, lp *loop, a action) event {
	cfg := q.cfg
	cur := &lp.cur
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
	switch a.Type {
	case actTarget:
		start, err := q.start(ctx, lp)
		if err == nil {
			if lp.target, err = cfg.Source.Latest(ctx, start, cfg.Clock.Now()); err != nil {
				err = fmt.Errorf("availableNow: read latest offsets: %w", err)
			}
		}
		if err != nil {
			return failed(err)
		}
		return event{Type: evTarget}

	case actPlan:
		if ctx.Err() != nil {
			return stopNow
		}
		cur.started = a.At
		if a.NoDataOnly {
			// A no-data batch run at once: it ends where it starts.
			start, err := q.start(ctx, lp)
			cur.planNow, lp.planEnd = cfg.Now(), start
			if err != nil {
				return failed(err)
			}
			return event{Type: evPlanned}
		}
		hasData, now, err := q.plan(ctx, lp, lp.target, a.Batch)
		cur.planNow = now
		if err != nil {
			return failed(err)
		}
		return event{Type: evPlanned, HasData: hasData}

	case actPrepare:
		manifest, err := q.snapshot(ctx, cur.planNow)
		if err != nil {
			return failed(fmt.Errorf("plan batch %d: %w", a.Batch, err))
		}
		cur.entry, cur.rerun = q.offsetEntry(a, cur.planNow, lp.ends[0], lp.planEnd, manifest), false
		return event{Type: evPrepared}

	case actWriteOffsets:
		if ctx.Err() != nil {
			return stopNow
		}
		if err := q.log.WriteOffsets(ctx, cur.entry); err != nil {
			return writeFailed(err)
		}
		return event{Type: evWritten}

	case actRun:
		q.startAttempt(cur, a)
		result, skipSink, err := q.attempt(ctx, cur.entry, batchWatermarks(cur.entry))
		if err != nil {
			return failed(err)
		}
		cur.result, cur.skipSink = result, skipSink
		q.hook("after-sink-commit", cur.entry.BatchID)
		return event{Type: evRan, MaxEventTime: result.MaxEventTime, HasEventTime: result.HasEventTime}

	case actRunMaps:
		q.startAttempt(cur, a)
		pr := q.runner.(task.PhasedRunner)
		if cur.running == nil {
			// Not started ahead (or a retry): start them now.
			var err error
			if cur.plan, err = q.batchPlan(ctx, cur.entry, batchWatermarks(cur.entry)); err != nil {
				return failed(err)
			}
			cur.running = pr.StartMaps(runCtx, cur.plan, false)
		}
		maps, err := pr.TakeMaps(ctx, cur.plan, cur.running)
		cur.running = nil
		if err != nil {
			return failed(err)
		}
		cur.maps = maps
		return event{Type: evMapsRan, MaxEventTime: maps.Result.MaxEventTime, HasEventTime: maps.Result.HasEventTime}

	case actPlanAhead:
		if len(cur.entry.Sources) == 0 {
			return event{Type: evPlanned} // a source-less entry: nothing to plan from
		}
		lp.ahead = &aheadBatch{start: cur.entry.Sources[0].End, started: a.At}
		hasData, err := q.planFrom(ctx, lp.ahead, lp.target, a.Batch)
		if err != nil {
			return failed(err)
		}
		return event{Type: evPlanned, HasData: hasData}

	case actStartAhead:
		if err := q.startAhead(ctx, runCtx, lp.ahead, a); err != nil {
			return failed(err)
		}
		return event{Type: evStarted}

	case actReduce:
		result, skipSink, err := q.reduceAttempt(ctx, cur.entry, cur.plan, cur.maps)
		cur.maps = nil
		if err != nil {
			return failed(err)
		}
		cur.result, cur.skipSink = result, skipSink
		q.hook("after-sink-commit", cur.entry.BatchID)
		return event{Type: evRan}

	case actTakeAhead:
		ah := lp.ahead
		lp.cur = inflight{entry: ah.entry, running: ah.maps, plan: ah.plan, started: ah.started, planNow: ah.planNow}
		lp.latest, lp.planEnd = ah.latest, ah.end
		lp.ahead = nil
		return event{Type: evPrepared}

	case actCommit:
		if a.Attempt == 1 {
			q.watermarkMoved(cur.entry, a, cur.result)
			cur.commitStart = cfg.Clock.Now()
			cur.commitEntry = q.commitEntry(cur.entry, cur.result, a.NextWatermark)
		}
		if ctx.Err() != nil {
			return stopNow
		}
		if err := q.log.WriteCommit(ctx, cur.commitEntry); err != nil {
			return writeFailed(err)
		}
		return event{Type: evWritten}

	case actCheckOwn:
		mine, err := q.log.WrittenBy(ctx, a.Key, q.runID)
		mine = err == nil && mine
		if mine {
			cfg.Logger.Info("a retried log write found its own earlier attempt", "query", cfg.Spec.Name, "object", a.Key)
		}
		return event{Type: evOwn, Mine: mine}

	case actFinish:
		err := q.finish(ctx, lp, cur)
		cur.rerun = false
		return event{Type: evCommitted, Err: err}

	case actWait:
		if !cfg.Clock.Sleep(ctx, a.D) {
			return stopNow
		}
		return event{Type: evElapsed}
	}
	return failed(fmt.Errorf("microbatch: unknown action %v", a.Type))
}

// startAttempt marks the start of an attempt of the batch in flight: its
// first attempt's fault point, or a re-run's start time.
func (q *Query) startAttempt(cur *inflight, a action) {
	cur.attempts = a.Attempt
	if a.Attempt != 1 {
		return
	}
	if cur.rerun {
		cur.started = q.cfg.Clock.Now()
		return
	}
	q.hook("after-offsets", cur.entry.BatchID)
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
func (q *Query) startAhead(ctx, runCtx context.Context, a *aheadBatch, act action) error {
	a.entry = q.offsetEntry(act, a.planNow, a.start, a.end, nil)
	var err error
	if a.plan, err = q.batchPlan(ctx, a.entry, batchWatermarks(a.entry)); err != nil {
		return err
	}
	// The tasks outlive this action: they run on the run's context, and
	// dropping the batch (aheadBatch.drop) stops them.
	a.maps = q.runner.(task.PhasedRunner).StartMaps(runCtx, a.plan, true)
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
	if q.qplan.Stateful() {
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

// finish does what follows the commit of the batch in flight: the hook, the source's
// clean-up, the progress report and retention. The error stops the run
// (a state budget with onExceed: stop).
func (q *Query) finish(ctx context.Context, lp *loop, cur *inflight) error {
	cfg := q.cfg
	e, res := cur.entry, cur.result
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
	if cur.rerun {
		latest = nil
	}
	inRate := progress.InputRowsPerSecond(res.InputRows, lp.lastBatchStart, cur.started)
	lp.lastBatchStart = cur.started
	p := q.report(ctx, cur, latest, inRate, done)
	q.cleaner.committed(e.BatchID)
	if sb := p.StateBudget; sb != nil && sb.Exceeded && cfg.Spec.StateBudget.Stops() {
		return fmt.Errorf("query %s stopped after batch %d committed: %s: %w", cfg.Spec.Name, e.BatchID, sb.Message, ErrStateBudgetExceeded)
	}
	return nil
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
