package microbatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/statestore"
)

// stepEpoch is the fake clock's start; times print as offsets from it.
var stepEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// stepSim drives the pure step with a fake clock.
type stepSim struct {
	m   *machine
	now time.Time
}

// wmDur prints a watermark as the time since the epoch.
func wmDur(w eventtime.Watermark) time.Duration { return time.Duration(w) * time.Microsecond }

func (s *stepSim) format(a action) string {
	var b strings.Builder
	if a.ReportIdle {
		fmt.Fprintf(&b, "idle last-committed=%d watermark=%v\n", a.Idle.LastCommitted, wmDur(a.Idle.Watermark))
	}
	switch a.Type {
	case actTarget:
		b.WriteString("target")
	case actPlan:
		fmt.Fprintf(&b, "plan batch=%d at=+%v", a.Batch, a.At.Sub(stepEpoch))
		if a.NoDataOnly {
			b.WriteString(" no-data-only")
		}
	case actPrepare:
		fmt.Fprintf(&b, "prepare batch=%d watermark=%v late=%v", a.Batch, wmDur(a.Watermark), wmDur(a.LateWatermark))
		if a.NoData {
			b.WriteString(" no-data")
		}
	case actWriteOffsets, actCommit:
		fmt.Fprintf(&b, "write %s attempt=%d", a.Key, a.Attempt)
		if a.Type == actCommit {
			fmt.Fprintf(&b, " next-watermark=%v", wmDur(a.NextWatermark))
			if a.Jumped {
				fmt.Fprintf(&b, " jumped=%v", time.Duration(a.JumpMicros)*time.Microsecond)
			}
		}
	case actRun:
		fmt.Fprintf(&b, "run batch=%d attempt=%d", a.Batch, a.Attempt)
	case actRunMaps:
		fmt.Fprintf(&b, "run-maps batch=%d attempt=%d", a.Batch, a.Attempt)
	case actPlanAhead:
		fmt.Fprintf(&b, "plan-ahead batch=%d at=+%v", a.Batch, a.At.Sub(stepEpoch))
	case actStartAhead:
		fmt.Fprintf(&b, "start-ahead batch=%d watermark=%v late=%v", a.Batch, wmDur(a.Watermark), wmDur(a.LateWatermark))
	case actReduce:
		fmt.Fprintf(&b, "reduce batch=%d attempt=%d", a.Batch, a.Attempt)
	case actTakeAhead:
		fmt.Fprintf(&b, "take-ahead batch=%d", a.Batch)
	case actCheckOwn:
		fmt.Fprintf(&b, "check-own %s", a.Key)
	case actFinish:
		fmt.Fprintf(&b, "finish batch=%d", a.Batch)
	case actWait:
		fmt.Fprintf(&b, "wait %v (%s", a.D, a.Why)
		if a.Op != opNone {
			fmt.Fprintf(&b, ": retry %s of batch %d after attempt %d: %v", a.Op, a.Batch, a.Attempt, a.Err)
		}
		b.WriteString(")")
	case actStop:
		fmt.Fprintf(&b, "stop %s", a.Reason)
		if a.Abandoned {
			b.WriteString(" abandoned")
		}
		if a.Err != nil {
			fmt.Fprintf(&b, ": %v", a.Err)
		}
	case actContinue:
		b.WriteString("continue")
		if !a.AbandonAt.IsZero() {
			fmt.Fprintf(&b, " abandon-at=+%v", a.AbandonAt.Sub(stepEpoch))
		}
	}
	if a.DropAhead {
		b.WriteString(" drop-ahead")
	}
	b.WriteString("\n")
	return b.String()
}

func parseDur(t *testing.T, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("bad duration %q: %v", v, err)
	}
	return d
}

// failure is an error of kind k, wrapping its sentinel the way the
// loop's errors do.
func failure(k failKind, msg string) error {
	sentinel := map[failKind]error{
		kindFenced: checkpoint.ErrFenced, kindDataLoss: source.ErrDataLoss, kindIncompatible: checkpoint.ErrIncompatibleCheckpoint,
		kindMemoryLimit: statestore.ErrMemoryLimit, kindCanceled: context.Canceled, kindCorrupt: statestore.ErrCorrupt,
	}[k]
	if sentinel == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, sentinel)
}

func (s *stepSim) cmd(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd == "config" {
		c := stepConfig{MaxAttempts: 3, Backoff: 200 * time.Millisecond, IdlePoll: 100 * time.Millisecond, NoDataBatches: true}
		for _, a := range td.CmdArgs {
			v := ""
			if len(a.Vals) > 0 {
				v = a.Vals[0]
			}
			switch a.Key {
			case "max-attempts":
				c.MaxAttempts, _ = strconv.Atoi(v)
			case "retry-for":
				c.RetryFor = parseDur(t, v)
			case "backoff":
				c.Backoff = parseDur(t, v)
			case "idle-poll":
				c.IdlePoll = parseDur(t, v)
			case "interval":
				c.Interval = parseDur(t, v)
			case "no-data-at-once":
				c.NoDataAtOnce = v == "true"
			case "once":
				c.Once = true
			case "available-now":
				c.AvailableNow = true
			case "evicts":
				c.Evicts = true
			case "no-data-batches":
				c.NoDataBatches = v == "true"
			case "delay":
				c.Watermark, c.Delay = true, parseDur(t, v).Microseconds()
			case "max-jump":
				c.MaxJump = parseDur(t, v).Microseconds()
			case "overlap":
				c.Overlap = true
			case "stop-timeout":
				c.StopTimeout = parseDur(t, v)
			default:
				t.Fatalf("config: unknown argument %s", a.Key)
			}
		}
		s.m, s.now = newMachine(c), stepEpoch
		return "ok\n"
	}
	if td.Cmd == "advance" {
		s.now = s.now.Add(parseDur(t, td.CmdArgs[0].Key))
		return fmt.Sprintf("now=+%v\n", s.now.Sub(stepEpoch))
	}
	ev := event{Now: s.now}
	arg := func(key string) (string, bool) {
		for _, a := range td.CmdArgs {
			if a.Key == key {
				if len(a.Vals) > 0 {
					return a.Vals[0], true
				}
				return "", true
			}
		}
		return "", false
	}
	switch td.Cmd {
	case "start":
		ev.Type = evStart
		if v, ok := arg("batch"); ok {
			ev.Batch, _ = ids.ParseBatchID(v)
		}
		if v, ok := arg("watermark"); ok {
			ev.Watermark = eventtime.WatermarkFromMillis(parseDur(t, v).Milliseconds())
		}
		if v, ok := arg("late"); ok {
			ev.LateWatermark = eventtime.WatermarkFromMillis(parseDur(t, v).Milliseconds())
		}
		_, ev.Rerun = arg("rerun")
	case "target":
		ev.Type = evTarget
	case "planned":
		ev.Type = evPlanned
		_, ev.HasData = arg("data")
	case "prepared":
		ev.Type = evPrepared
	case "written":
		ev.Type = evWritten
	case "ran":
		ev.Type = evRan
		if v, ok := arg("max"); ok {
			ev.MaxEventTime, ev.HasEventTime = parseDur(t, v).Microseconds(), true
		}
	case "maps-ran":
		ev.Type = evMapsRan
		if v, ok := arg("max"); ok {
			ev.MaxEventTime, ev.HasEventTime = parseDur(t, v).Microseconds(), true
		}
	case "started":
		ev.Type = evStarted
	case "committed":
		ev.Type = evCommitted
		if _, ok := arg("budget-exceeded"); ok {
			ev.Err = fmt.Errorf("state budget: %w", ErrStateBudgetExceeded)
		}
	case "fail":
		ev.Type = evFailed
		kind, _ := arg("kind")
		found := false
		for k, name := range kindNames {
			if name == kind {
				ev.Kind, found = failKind(k), true
			}
		}
		if !found {
			t.Fatalf("fail: unknown kind %q", kind)
		}
		msg, ok := arg("msg")
		if !ok {
			msg = kind
		}
		ev.Err = failure(ev.Kind, msg)
	case "own":
		ev.Type = evOwn
		_, ev.Mine = arg("mine")
	case "elapsed":
		ev.Type = evElapsed
	case "stop":
		ev.Type = evStop
		_, ev.StopNow = arg("now")
		_, ev.Shutdown = arg("shutdown")
		if v, ok := arg("timeout"); ok {
			ev.Timeout = parseDur(t, v)
		}
	case "abandon":
		ev.Type = evAbandon
	case "pause":
		ev.Type = evPause
	case "lease-lost":
		ev.Type = evLeaseLost
	default:
		t.Fatalf("unknown command %s", td.Cmd)
	}
	return s.format(s.m.step(ev))
}

func TestStep(t *testing.T) {
	datadriven.Walk(t, "testdata/step", func(t *testing.T, path string) {
		s := &stepSim{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return s.cmd(t, td)
		})
	})
}

// Errors are classified by their sentinels, however wrapped: an error
// decoded from a remote executor into the same sentinel classifies alike.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want failKind
	}{
		{errors.New("connection refused"), kindTransient},
		{fmt.Errorf("commits/3: %w", checkpoint.ErrFenced), kindFenced},
		{&checkpoint.FencedError{Batch: 3, Object: "commits/3"}, kindFenced},
		{fmt.Errorf("batch 2: %w", source.ErrDataLoss), kindDataLoss},
		{fmt.Errorf("x: %w", checkpoint.ErrIncompatibleCheckpoint), kindIncompatible},
		{fmt.Errorf("x: %w", statestore.ErrMemoryLimit), kindMemoryLimit},
		{fmt.Errorf("x: %w", context.Canceled), kindCanceled},
		{fmt.Errorf("state file x: checksum: %w", statestore.ErrCorrupt), kindCorrupt},
		{context.DeadlineExceeded, kindCanceled},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
