package microbatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
)

// This file is the batch loop's decisions, without I/O: machine.step takes
// what just happened (an event, stamped with the clock's time) and returns
// the next thing to do (an action). Run performs the actions and feeds
// their outcomes back (loop.go has the performing side). Retry budgets,
// back-off, no-data batches, watermark arithmetic, triggers, idleness and
// stopping are all decided here; the datadriven cases in testdata/step
// drive it with a fake clock.

// ErrLeaseLost: the run stopped because its driver no longer holds the
// lease (the LeaseLost signal); nothing more was written.
var ErrLeaseLost = errors.New("lease lost: stopped without writing")

// maxBackoff caps the doubling wait between retries.
const maxBackoff = 10 * time.Second

// failKind classifies a failure for the step: whether retrying can fix it. The
// loop derives it from the error's sentinels (classify), so an error that
// wraps one (decoded from a remote executor, say) is classified the same.
type failKind int

const (
	// kindTransient: failures are retried within the budget.
	kindTransient failKind = iota
	// kindFenced: a create-if-absent log write found the entry there.
	kindFenced
	// kindDataLoss: the source no longer has offsets the batch needs.
	kindDataLoss
	// kindIncompatible: the checkpoint does not fit the query.
	kindIncompatible
	// kindMemoryLimit: a state store passed its memory limit.
	kindMemoryLimit
	// kindCanceled: the run's context ended.
	kindCanceled
	// kindCorrupt: committed state failed its checksum or is missing:
	// every attempt would load the same state.
	kindCorrupt
)

var kindNames = [...]string{"transient", "fenced", "dataloss", "incompatible", "memlimit", "canceled", "corrupt"}

func (k failKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// permanent reports kinds that retrying cannot fix.
func (k failKind) permanent() bool { return k != kindTransient }

// classify maps an error to its failKind.
func classify(err error) failKind {
	switch {
	case errors.Is(err, checkpoint.ErrFenced):
		return kindFenced
	case errors.Is(err, checkpoint.ErrIncompatibleCheckpoint):
		return kindIncompatible
	case errors.Is(err, source.ErrDataLoss):
		return kindDataLoss
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return kindCanceled
	case errors.Is(err, statestore.ErrMemoryLimit):
		return kindMemoryLimit
	case errors.Is(err, statestore.ErrCorrupt):
		return kindCorrupt
	}
	return kindTransient
}

// retryPolicy is the one rule for retrying an operation (planning, a log
// write, a batch): permanent failures give up at once; otherwise an
// operation gets at least minAttempts tries and keeps trying while its
// failures have lasted less than budget, waiting first, then twice as long
// each time, up to maxBackoff.
type retryPolicy struct {
	minAttempts int
	budget      time.Duration
	first       time.Duration
}

// retry is one operation's failures so far (zero: none).
type retry struct {
	attempts int // failed attempts
	since    time.Time
	next     time.Duration // the next wait (0: policy.first)
}

// fail records a failure of kind k at now: the wait before the next try,
// or giveUp.
func (p retryPolicy) fail(r *retry, now time.Time, k failKind) (wait time.Duration, giveUp bool) {
	r.attempts++
	if r.since.IsZero() {
		r.since = now
	}
	if k.permanent() || (r.attempts >= p.minAttempts && now.Sub(r.since) >= p.budget) {
		return 0, true
	}
	if r.next == 0 {
		r.next = p.first
	}
	wait = r.next
	r.next = min(2*r.next, maxBackoff)
	return wait, false
}

// stepConfig is what the step needs of the query's config.
type stepConfig struct {
	MaxAttempts  int
	RetryFor     time.Duration // Config.PlanRetryFor
	Backoff      time.Duration // the first wait between tries
	IdlePoll     time.Duration
	Interval     time.Duration // processingTime (0: as soon as possible)
	Once         bool
	AvailableNow bool
	// Evicts: the query evicts state by watermark; NoDataBatches: the
	// spec runs no-data batches (both needed for one).
	Evicts, NoDataBatches bool
	// NoDataAtOnce (trigger.noDataBatchesAtOnce, with an Interval): the
	// no-data batch a commit makes due runs at once instead of at the
	// next trigger, and does not move the trigger's schedule.
	NoDataAtOnce bool
	// Watermark: the spec has one, with Delay and MaxJump (µs).
	Watermark      bool
	Delay, MaxJump int64
	// StopTimeout bounds how long a graceful stop (or pause) waits for
	// the batch in flight to commit before abandoning it (zero: no
	// bound).
	StopTimeout time.Duration
	// Overlap: a batch runs as map tasks, then reduce tasks (actRunMaps,
	// actReduce), and while it reduces and commits the next batch is
	// planned and its map tasks started (actPlanAhead, actStartAhead):
	// the runner can start map tasks before their batch is logged, and
	// the trigger runs the next batch at once (availableNow, or
	// processingTime 0).
	Overlap bool
}

func (c *stepConfig) planPolicy() retryPolicy { return retryPolicy{1, c.RetryFor, c.Backoff} }
func (c *stepConfig) writePolicy() retryPolicy {
	return retryPolicy{1, c.RetryFor, c.Backoff}
}
func (c *stepConfig) batchPolicy() retryPolicy {
	return retryPolicy{c.MaxAttempts, c.RetryFor, c.Backoff}
}

// eventType says what happened.
type eventType int

const (
	// evStart: the run starts at Batch with watermarks Watermark and
	// LateWatermark; Rerun: Batch was logged and not committed, and
	// runs again as logged (with those watermarks).
	evStart eventType = iota
	// evTarget: availableNow's target offsets were read.
	evTarget
	// evPlanned: the source was read; HasData says whether it has rows
	// past the last batch.
	evPlanned
	// evPrepared: the planned batch's entry is built (join snapshot
	// taken), or the batch planned ahead is taken (actTakeAhead).
	evPrepared
	// evWritten: the log write asked for (offsets/N or commits/N) is done.
	evWritten
	// evRan: the batch's tasks ran (after actRun; its reduce tasks after
	// actReduce) and its sink output is committed; MaxEventTime (µs) and
	// HasEventTime are what it saw (after actRun).
	evRan
	// evCommitted: the batch's post-commit work is done; Err, if set,
	// stops the run (a state budget with onExceed: stop).
	evCommitted
	// evFailed: the action failed with Err, of kind Kind.
	evFailed
	// evOwn: the log was asked who wrote an entry a retried write found;
	// Mine says it was this run's earlier attempt.
	evOwn
	// evElapsed: a wait ended.
	evElapsed
	// evMapsRan: the batch's map tasks ended; MaxEventTime (µs) and
	// HasEventTime are what they saw.
	evMapsRan
	// evStarted: the next batch's map tasks were started ahead.
	evStarted
	// evStop: a stop was asked (the Stop, StopNow or Shutdown signal);
	// StopNow abandons the batch in flight, otherwise it commits first,
	// within StopTimeout; Shutdown: the driver is shutting down.
	evStop
	// evPause: a pause was asked: like a graceful stop.
	evPause
	// evLeaseLost: another driver holds the lease; stop without writing.
	evLeaseLost
	// evAbandon: the time a graceful stop gave the batch in flight is up
	// (the action's AbandonAt passed).
	evAbandon
)

var eventNames = [...]string{"start", "target", "planned", "prepared", "written", "ran", "committed", "failed", "own", "elapsed", "maps-ran", "started", "stop", "pause", "lease-lost", "abandon"}

func (t eventType) String() string { return eventNames[t] }

// event is what just happened, at Now.
type event struct {
	Type eventType
	Now  time.Time

	Batch                    ids.BatchID         // evStart
	Watermark, LateWatermark eventtime.Watermark // evStart
	Rerun                    bool                // evStart
	HasData                  bool                // evPlanned
	MaxEventTime             int64               // evRan
	HasEventTime             bool                // evRan
	Kind                     failKind            // evFailed
	Err                      error               // evFailed, evCommitted
	Mine                     bool                // evOwn
	StopNow                  bool                // evStop
	Shutdown                 bool                // evStop
	Timeout                  time.Duration       // evStop, evPause: the graceful stop's bound (0: StopTimeout)
}

// actionType says what to do next.
type actionType int

const (
	// actTarget: read availableNow's target offsets.
	actTarget actionType = iota
	// actPlan: read the source for the next batch (the trigger starts At).
	actPlan
	// actPrepare: build Batch's offsets entry (NoData, Watermark,
	// LateWatermark), taking the join snapshot if one is due.
	actPrepare
	// actWriteOffsets: write offsets/Batch (Attempt counts from 1).
	actWriteOffsets
	// actRun: run Batch's tasks and commit its sink output (Attempt).
	actRun
	// actCommit: write commits/Batch with NextWatermark (Attempt).
	actCommit
	// actCheckOwn: a retried write of Key was fenced: ask the log whether
	// this run's earlier attempt wrote it.
	actCheckOwn
	// actFinish: Batch is committed: hooks, source clean-up, progress.
	actFinish
	// actWait: wait D (Why); after a failure, Op's attempt Attempt failed
	// with Err and is tried again.
	actWait
	// actStop: the run ends with Err (nil: a clean stop), for Reason.
	actStop
	// actRunMaps: run Batch's map tasks (Attempt), or take those started
	// ahead (Overlap).
	actRunMaps
	// actPlanAhead: Batch's map tasks ran and the next batch is due at
	// once: read the source for it (Batch; the trigger starts At).
	actPlanAhead
	// actStartAhead: start the map tasks of the batch planned ahead
	// (Batch), with its watermarks (Watermark, LateWatermark), before
	// its offsets are logged: they write nothing until actRunMaps takes
	// them.
	actStartAhead
	// actReduce: run Batch's reduce tasks over its map tasks' output and
	// commit its sink output (Attempt).
	actReduce
	// actTakeAhead: Batch, planned and started ahead, is the batch in
	// flight now: its entry is the one it was started with.
	actTakeAhead
	// actContinue: a graceful stop or pause was accepted while a batch is
	// in flight: go on with the action outstanding, so the batch
	// commits; if AbandonAt is set, abandon it then (evAbandon).
	actContinue
)

var actionNames = [...]string{"target", "plan", "prepare", "write-offsets", "run", "commit", "check-own", "finish", "wait", "stop", "run-maps", "plan-ahead", "start-ahead", "reduce", "take-ahead", "continue"}

func (t actionType) String() string { return actionNames[t] }

// retryOp names the operation a retry wait is for.
type retryOp int

const (
	opNone retryOp = iota
	opPlan
	opOffsets
	opRun
	opCommit
)

var opNames = [...]string{"", "plan", "offsets", "run", "commit"}

func (o retryOp) String() string { return opNames[o] }

// stopReason says why a run stops.
type stopReason int

const (
	stopDone      stopReason = iota // the trigger is done (once, availableNow)
	stopRequested                   // a stop was asked
	stopPaused                      // a pause was asked
	stopLeaseLost                   // the lease went to another driver
	stopFailed                      // Err
	stopShutdown                    // the driver is shutting down
)

var reasonNames = [...]string{"done", "requested", "paused", "lease-lost", "failed", "shutdown"}

func (r stopReason) String() string { return reasonNames[r] }

// action is what to do next.
type action struct {
	Type actionType

	At                       time.Time           // actPlan: the trigger's start
	NoDataOnly               bool                // actPlan: a no-data batch: do not read the source
	Batch                    ids.BatchID         // actPrepare..actFinish, actWait after a failure
	NoData                   bool                // actPrepare
	Watermark, LateWatermark eventtime.Watermark // actPrepare
	Attempt                  int                 // actWriteOffsets, actRun, actCommit; actWait: the failed attempt
	NextWatermark            eventtime.Watermark // actCommit
	Jumped                   bool                // actCommit: the watermark moved by more than maxJump
	JumpMicros               int64               // actCommit: the move when Jumped
	Key                      string              // actWriteOffsets, actCommit, actCheckOwn; actWait after a failed log write
	D                        time.Duration       // actWait
	Why                      string              // actWait: backoff, trigger, idle
	Op                       retryOp             // actWait after a failure
	Err                      error               // actWait: the failure; actStop: the run's error
	Reason                   stopReason          // actStop
	// ReportIdle: tell Config.Observer that the query is Idle before acting.
	ReportIdle bool
	Idle       progress.Idle
	// DropAhead: abandon the batch planned ahead (stop its map tasks)
	// before acting; nothing of it was written.
	DropAhead bool
	// AbandonAt (actContinue): when the batch in flight is abandoned if
	// it has not committed (zero: never).
	AbandonAt time.Time
	// Abandoned (actStop): the batch in flight was abandoned, not
	// committed; its logged offsets are re-run by the next run.
	Abandoned bool
}

type phase int

const (
	phStart phase = iota
	phTarget
	phPlan    // actPlan or actPrepare outstanding
	phOffsets // actWriteOffsets / actCheckOwn outstanding
	phRun
	phCommit
	phFinish
	phWait
	phStopped
	phMaps   // actRunMaps outstanding
	phAhead  // actPlanAhead or actStartAhead outstanding
	phReduce // actReduce outstanding
)

// machine is the loop's state between actions. step is its only mutator.
type machine struct {
	cfg   stepConfig
	phase phase

	// next is the batch to plan (or the batch in flight); usedWM and
	// nextWM the watermarks the last batch evicted with and the next one
	// evicts with.
	next           ids.BatchID
	usedWM, nextWM eventtime.Watermark
	// The batch in flight: the watermark it evicts with, and the next one
	// it computed.
	curWM, curNext  eventtime.Watermark
	batches         int // batches committed by this run
	idleAt          int // batches when Idle was last reported (-1: never)
	needTarget      bool
	planAt, lastRun time.Time
	// retry counts the failures of the operation in flight; planRetry
	// those of planning, which last across idle triggers until a plan
	// succeeds.
	retry, planRetry retry
	fenced           error // a fenced write waiting for actCheckOwn's answer
	// atOnce: the batch being planned is a no-data batch run at once
	// after a commit (NoDataAtOnce); it keeps lastRun, the trigger's.
	atOnce bool
	// after says what follows a wait: a retry of Op, or a trigger.
	after        retryOp
	afterAttempt int
	waitWhy      string
	// stopAfter: a graceful stop (or pause) waits for the batch in flight.
	stopAfter bool
	stopWhy   stopReason
	stopBy    time.Time // when stopAfter abandons it (zero: never)
	// pending is the last action handed out and not yet answered.
	pending action
	// ahead: the batch after the one in flight is planned and its map
	// tasks started (Overlap); aheadAt is its trigger's start. attempt is
	// the in-flight batch's run attempt (Overlap: actRunMaps, then
	// actReduce). The jump of the in-flight batch's watermark, for its
	// commit.
	ahead      bool
	aheadAt    time.Time
	attempt    int
	jumped     bool
	jumpMicros int64
}

func newMachine(cfg stepConfig) *machine {
	return &machine{cfg: cfg, idleAt: -1}
}

// step applies ev and returns the next action.
func (m *machine) step(ev event) action {
	a := m.apply(ev)
	if a.Type == actStop && m.ahead {
		// Whatever stops the run abandons the batch planned ahead.
		m.ahead, a.DropAhead = false, true
	}
	if a.Type == actContinue {
		return a // the outstanding action stays pending
	}
	m.pending = a
	if a.Type == actStop {
		m.phase = phStopped
	}
	return a
}

func (m *machine) apply(ev event) action {
	if m.phase == phStopped {
		return m.pending
	}
	switch ev.Type {
	case evStop:
		why := stopRequested
		if ev.Shutdown {
			why = stopShutdown
		}
		if ev.StopNow {
			return action{Type: actStop, Reason: why, Abandoned: m.inFlight()}
		}
		return m.stopGracefully(ev.Now, ev.Timeout, why)
	case evPause:
		return m.stopGracefully(ev.Now, ev.Timeout, stopPaused)
	case evLeaseLost:
		return action{Type: actStop, Reason: stopLeaseLost, Err: ErrLeaseLost, Abandoned: m.inFlight()}
	case evAbandon:
		if m.stopAfter && !m.stopBy.IsZero() && !ev.Now.Before(m.stopBy) {
			return action{Type: actStop, Reason: m.stopWhy, Abandoned: m.inFlight()}
		}
		return action{Type: actContinue}
	}
	switch m.phase {
	case phStart:
		if ev.Type != evStart {
			break
		}
		m.needTarget = m.cfg.AvailableNow
		if ev.Rerun {
			m.next, m.curWM = ev.Batch, ev.Watermark
			return m.startRun()
		}
		m.next, m.nextWM, m.usedWM = ev.Batch, ev.Watermark, ev.LateWatermark
		return m.afterBatch(ev.Now)
	case phTarget:
		switch ev.Type {
		case evTarget:
			m.needTarget = false
			return m.trigger(ev.Now)
		case evFailed:
			return m.fail(ev.Err)
		}
	case phPlan:
		switch ev.Type {
		case evPlanned:
			return m.planned(ev)
		case evPrepared:
			m.planRetry = retry{}
			if !m.atOnce {
				m.lastRun = m.planAt
			}
			m.atOnce = false
			m.retry = retry{}
			m.phase = phOffsets
			return action{Type: actWriteOffsets, Batch: m.next, Attempt: 1, Key: m.offsetsKey()}
		case evFailed:
			wait, giveUp := m.cfg.planPolicy().fail(&m.planRetry, ev.Now, ev.Kind)
			if giveUp {
				err := ev.Err
				if !ev.Kind.permanent() && m.cfg.RetryFor > 0 {
					err = fmt.Errorf("planning has failed for %v: %w", m.cfg.RetryFor, err)
				}
				return m.fail(err)
			}
			return m.wait(wait, "backoff", opPlan, m.planRetry.attempts, ev.Err)
		}
	case phOffsets, phCommit:
		key := m.offsetsKey()
		if m.phase == phCommit {
			key = m.commitKey()
		}
		switch ev.Type {
		case evWritten:
			return m.written()
		case evFailed:
			if ev.Kind == kindFenced {
				if m.retry.attempts > 0 {
					m.fenced = ev.Err
					return action{Type: actCheckOwn, Batch: m.next, Key: key}
				}
				return m.fail(ev.Err)
			}
			wait, giveUp := m.cfg.writePolicy().fail(&m.retry, ev.Now, ev.Kind)
			if giveUp {
				err := ev.Err
				if !ev.Kind.permanent() && m.cfg.RetryFor > 0 {
					err = fmt.Errorf("write %s has failed for %v: %w", key, m.cfg.RetryFor, err)
				}
				return m.fail(err)
			}
			op := opOffsets
			if m.phase == phCommit {
				op = opCommit
			}
			a := m.wait(wait, "backoff", op, m.retry.attempts, ev.Err)
			a.Key = key
			return a
		case evOwn:
			if ev.Mine {
				return m.written()
			}
			return m.fail(m.fenced)
		}
	case phRun:
		switch ev.Type {
		case evRan:
			return m.ran(ev)
		case evFailed:
			return m.runFailed(ev)
		}
	case phMaps:
		switch ev.Type {
		case evMapsRan:
			return m.mapsRan(ev)
		case evFailed:
			return m.runFailed(ev)
		}
	case phAhead:
		switch ev.Type {
		case evPlanned:
			if ev.HasData && !m.stopAfter {
				return action{Type: actStartAhead, Batch: m.next + 1, Watermark: m.curNext, LateWatermark: m.curWM}
			}
			return m.reduce()
		case evStarted:
			m.ahead = true
			return m.reduce()
		case evFailed:
			// Planning ahead is an optimisation: a failure is forgotten,
			// and the next batch is planned after this one commits, with
			// the retries planning has.
			return m.reduce()
		}
	case phReduce:
		switch ev.Type {
		case evRan:
			return m.commit()
		case evFailed:
			return m.runFailed(ev)
		}
	case phFinish:
		if ev.Type != evCommitted {
			break
		}
		m.usedWM, m.nextWM = m.curWM, m.curNext
		m.next++
		m.batches++
		if ev.Err != nil {
			return m.fail(ev.Err)
		}
		if m.cfg.Once {
			return action{Type: actStop, Reason: stopDone}
		}
		if m.stopAfter {
			return action{Type: actStop, Reason: m.stopWhy}
		}
		if m.ahead {
			// The batch planned ahead had data: it is the next batch,
			// with the watermarks it was started with (this batch's).
			m.ahead = false
			m.phase, m.planAt = phPlan, m.aheadAt
			m.curWM = m.nextWM
			return action{Type: actTakeAhead, Batch: m.next}
		}
		return m.afterBatch(ev.Now)
	case phWait:
		if ev.Type != evElapsed {
			break
		}
		switch m.after {
		case opNone:
			if m.waitWhy == "trigger" {
				return m.plan(ev.Now)
			}
			return m.trigger(ev.Now)
		case opPlan:
			return m.trigger(ev.Now)
		case opOffsets:
			m.phase = phOffsets
			return action{Type: actWriteOffsets, Batch: m.next, Attempt: m.afterAttempt + 1, Key: m.offsetsKey()}
		case opRun:
			return m.run(m.afterAttempt + 1)
		case opCommit:
			m.phase = phCommit
			return action{Type: actCommit, Batch: m.next, Attempt: m.afterAttempt + 1, NextWatermark: m.curNext, Key: m.commitKey()}
		}
	}
	return m.fail(fmt.Errorf("scheduler: event %s in state %s", ev.Type, m.phaseName()))
}

// stopGracefully stops at once when no batch is in flight; otherwise the
// batch in flight commits first, within timeout (zero: StopTimeout), and
// nothing new is planned. A later graceful stop can only bring the
// deadline forward.
func (m *machine) stopGracefully(now time.Time, timeout time.Duration, why stopReason) action {
	if !m.inFlight() {
		return action{Type: actStop, Reason: why}
	}
	if !m.stopAfter {
		m.stopAfter, m.stopWhy = true, why
	}
	if timeout <= 0 {
		timeout = m.cfg.StopTimeout
	}
	if timeout > 0 {
		if by := now.Add(timeout); m.stopBy.IsZero() || by.Before(m.stopBy) {
			m.stopBy = by
		}
	}
	return action{Type: actContinue, AbandonAt: m.stopBy}
}

// inFlight reports a batch past its offsets write's start: a graceful stop
// lets it commit.
func (m *machine) inFlight() bool {
	switch m.phase {
	case phOffsets, phRun, phCommit, phFinish, phMaps, phAhead, phReduce:
		return true
	case phWait:
		return m.after == opOffsets || m.after == opRun || m.after == opCommit
	}
	return false
}

func (m *machine) offsetsKey() string { return fmt.Sprintf("offsets/%d", m.next) }
func (m *machine) commitKey() string  { return fmt.Sprintf("commits/%d", m.next) }

func (m *machine) fail(err error) action {
	return action{Type: actStop, Reason: stopFailed, Err: err}
}

func (m *machine) wait(d time.Duration, why string, op retryOp, attempt int, err error) action {
	m.phase, m.after, m.afterAttempt, m.waitWhy = phWait, op, attempt, why
	return action{Type: actWait, D: d, Why: why, Op: op, Batch: m.next, Attempt: attempt, Err: err}
}

// afterBatch is where the run goes once no batch is in flight (at start,
// or after a commit): availableNow's target first, then the trigger; with
// NoDataAtOnce, a no-data batch the last commit made due runs first,
// without waiting for the trigger (docs/query.md#triggernodatabatchesatonce).
func (m *machine) afterBatch(now time.Time) action {
	if m.needTarget {
		m.phase = phTarget
		return action{Type: actTarget}
	}
	if m.cfg.NoDataAtOnce && m.cfg.Interval > 0 && m.batches > 0 &&
		eventtime.NeedsNoDataBatch(m.cfg.Evicts, m.cfg.NoDataBatches, m.usedWM, m.nextWM) {
		m.atOnce = true
		m.phase, m.planAt = phPlan, now
		return action{Type: actPlan, At: now, Batch: m.next, NoDataOnly: true}
	}
	return m.trigger(now)
}

// trigger waits for processingTime's interval since the last trigger, then
// plans.
func (m *machine) trigger(now time.Time) action {
	if m.cfg.Interval > 0 && !m.lastRun.IsZero() {
		if d := m.lastRun.Add(m.cfg.Interval).Sub(now); d > 0 {
			return m.wait(d, "trigger", opNone, 0, nil)
		}
	}
	return m.plan(now)
}

// plan starts a trigger at now.
func (m *machine) plan(now time.Time) action {
	m.phase, m.planAt, m.atOnce = phPlan, now, false
	return action{Type: actPlan, At: now, Batch: m.next}
}

func (m *machine) planned(ev event) action {
	noData := !ev.HasData && eventtime.NeedsNoDataBatch(m.cfg.Evicts, m.cfg.NoDataBatches, m.usedWM, m.nextWM)
	if ev.HasData || noData {
		m.curWM = m.nextWM
		return action{Type: actPrepare, Batch: m.next, NoData: noData, Watermark: m.nextWM, LateWatermark: m.usedWM}
	}
	m.planRetry = retry{}
	stops := m.cfg.AvailableNow || m.cfg.Once
	report := m.batches != m.idleAt && (!stops || m.batches == 0)
	if report {
		m.idleAt = m.batches
	}
	idle := progress.Idle{LastCommitted: m.next - 1, Watermark: m.nextWM}
	var a action
	switch {
	case stops:
		a = action{Type: actStop, Reason: stopDone}
	default:
		m.lastRun = m.planAt
		if m.cfg.Interval == 0 {
			a = m.wait(m.cfg.IdlePoll, "idle", opNone, 0, nil)
		} else {
			a = m.trigger(ev.Now)
		}
	}
	a.ReportIdle, a.Idle = report, idle
	return a
}

func (m *machine) startRun() action {
	m.retry = retry{}
	return m.run(1)
}

// run runs the batch in flight: as one action, or with Overlap its map
// tasks first.
func (m *machine) run(attempt int) action {
	m.attempt = attempt
	if m.cfg.Overlap {
		m.phase = phMaps
		return action{Type: actRunMaps, Batch: m.next, Attempt: attempt}
	}
	m.phase = phRun
	return action{Type: actRun, Batch: m.next, Attempt: attempt}
}

// runFailed retries the batch in flight, or gives up; a batch planned
// ahead is abandoned (after a retry the next batch is planned again).
func (m *machine) runFailed(ev event) action {
	if m.stopAfter && ev.Kind == kindCanceled {
		// The runner gave the batch up for the graceful stop (it had run
		// nothing: task.Draining); its offsets are re-run next time.
		return action{Type: actStop, Reason: m.stopWhy, Abandoned: true}
	}
	wait, giveUp := m.cfg.batchPolicy().fail(&m.retry, ev.Now, ev.Kind)
	if giveUp {
		return m.fail(fmt.Errorf("batch %d failed after %d attempts: %w", m.next, m.retry.attempts, ev.Err))
	}
	a := m.wait(wait, "backoff", opRun, m.retry.attempts, ev.Err)
	a.DropAhead, m.ahead = m.ahead, false
	return a
}

// mapsRan computes the watermark the next batch evicts with from the map
// tasks' event times; the next batch is planned ahead when it is due at
// once and no stop is waiting, else the reduce tasks run.
func (m *machine) mapsRan(ev event) action {
	m.nextWatermark(ev)
	if m.stopAfter {
		return m.reduce()
	}
	m.phase, m.aheadAt = phAhead, ev.Now
	return action{Type: actPlanAhead, Batch: m.next + 1, At: ev.Now}
}

func (m *machine) reduce() action {
	m.phase = phReduce
	return action{Type: actReduce, Batch: m.next, Attempt: m.attempt}
}

func (m *machine) written() action {
	m.fenced = nil
	if m.phase == phOffsets {
		return m.startRun()
	}
	m.phase = phFinish
	return action{Type: actFinish, Batch: m.next}
}

// ran computes the watermark the next batch evicts with and asks for the
// commit.
func (m *machine) ran(ev event) action {
	m.nextWatermark(ev)
	return m.commit()
}

// nextWatermark computes, from the event times the batch in flight saw,
// the watermark the next batch evicts with.
func (m *machine) nextWatermark(ev event) {
	evict, next := m.curWM, m.curWM
	m.jumped, m.jumpMicros = false, 0
	if m.cfg.Watermark {
		next = eventtime.Advance(evict, ev.MaxEventTime, ev.HasEventTime, m.cfg.Delay)
		m.jumpMicros, m.jumped = eventtime.Jump(evict, next, m.cfg.MaxJump)
		if !m.jumped {
			m.jumpMicros = 0
		}
	}
	m.curNext = next
}

// commit asks for the in-flight batch's commit with the next watermark.
func (m *machine) commit() action {
	m.phase, m.retry = phCommit, retry{}
	return action{Type: actCommit, Batch: m.next, Attempt: 1, Key: m.commitKey(), NextWatermark: m.curNext, Jumped: m.jumped, JumpMicros: m.jumpMicros}
}

func (m *machine) phaseName() string {
	return [...]string{"start", "target", "plan", "offsets", "run", "commit", "finish", "wait", "stopped", "maps", "ahead", "reduce"}[m.phase]
}
