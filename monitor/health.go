package monitor

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/progress"
)

// Health is a query's single verdict for an operator: is it fine, is its
// source merely quiet, or does someone need to look.
type Health string

// Healths of ClassifyHealth.
const (
	// Healthy: the query runs and gets through its input.
	Healthy Health = "healthy"
	// IdleSource: the query runs, no new input arrives and nothing waits
	// (lag zero, or a source without lag): quiet, not a fault.
	IdleSource Health = "idle"
	// IncidentHealth: the query is not getting through (see the reason):
	// watermark stalled while lag grows, lag growing batch after batch,
	// batches slower than the trigger, a batch stuck in flight, batch
	// retries failing, or the query failed.
	IncidentHealth Health = "incident"
	// Inactive: the query is not meant to be running now (pending,
	// starting, stopping, stopped or finished).
	Inactive Health = "inactive"
)

// Healths lists every health (for one 0/1 gauge per health).
var Healths = []Health{Healthy, IdleSource, IncidentHealth, Inactive}

// HealthOptions tune ClassifyHealth; zero values take the defaults.
type HealthOptions struct {
	// Stall is how long the watermark, or the commits, may stay put before
	// they count as stalled (default 5m).
	Stall time.Duration
	// SlowBatches is N: N batches in a row slower than the trigger, or N
	// batches in a row each with more lag than the one before, are an
	// incident (default 3).
	SlowBatches int
}

func (o HealthOptions) withDefaults() HealthOptions {
	if o.Stall <= 0 {
		o.Stall = 5 * time.Minute
	}
	if o.SlowBatches <= 0 {
		o.SlowBatches = 3
	}
	return o
}

// HealthStatus is a health with the one sentence that explains it.
type HealthStatus struct {
	Health Health `json:"health"`
	Reason string `json:"reason"`
	// Watermark is the watermark verdict the health took into account.
	Watermark WatermarkStatus `json:"watermark"`
}

// ClassifyHealth judges query v from its recent progress ps (oldest first)
// at time now. The rules, first match wins:
//
//   - FAILED is an incident; RECOVERING is an incident (batch retries are
//     failing); any other state but RUNNING is inactive.
//   - A batch planned (offsets logged) but not committed for longer than
//     max(Stall, N × trigger) is an incident (executors stopped or stuck).
//   - The last N batches each slower than the processingTime trigger
//     (durationMs.triggerExecution) is an incident.
//   - The watermark verdict Incident (stalled while lag grows, or data
//     waits and nothing is read) is an incident.
//   - Source lag higher at each of the last N batches than at the one
//     before is an incident (falling behind).
//   - The watermark verdict Idle, or no batch committed for Stall while the
//     last batch left no lag (or its source reports none), is an idle
//     source.
//   - Otherwise healthy.
//
// It is pure: every input is an argument.
func ClassifyHealth(v View, ps []*progress.Report, now time.Time, o HealthOptions) HealthStatus {
	o = o.withDefaults()
	ws := ClassifyWatermark(ps, now, o.Stall)
	st := func(h Health, format string, args ...any) HealthStatus {
		return HealthStatus{Health: h, Reason: fmt.Sprintf(format, args...), Watermark: ws}
	}
	switch v.State {
	case Failed:
		return st(IncidentHealth, "query failed: %s", orNone(v.LastError))
	case Recovering:
		return st(IncidentHealth, "batch retries failing: %s", orNone(v.LastError))
	case Running:
	default:
		return st(Inactive, "query is %s", v.State)
	}
	n := o.SlowBatches
	if !v.InFlightSince.IsZero() {
		limit := max(o.Stall, time.Duration(n)*v.Trigger)
		if d := now.Sub(v.InFlightSince); d > limit {
			return st(IncidentHealth, "batch %d in flight for %s (limit %s): executors stopped or stuck", v.InFlight, d.Round(time.Second), limit)
		}
	}
	if v.Trigger > 0 && len(ps) >= n {
		slow := 0
		for _, p := range ps[len(ps)-n:] {
			if time.Duration(p.DurationMs["triggerExecution"])*time.Millisecond > v.Trigger {
				slow++
			}
		}
		if slow == n {
			return st(IncidentHealth, "the last %d batches each took longer than the %s trigger", n, v.Trigger)
		}
	}
	if ws.Verdict == Incident {
		return st(IncidentHealth, "%s (lag %d → %d over %s)", ws.Verdict.Describe(), ws.LagFrom, ws.LagTo, ws.StalledFor.Round(time.Second))
	}
	if len(ps) > n {
		rising := true
		prev, ok := totalLag(ps[len(ps)-n-1])
		for _, p := range ps[len(ps)-n:] {
			l, has := totalLag(p)
			if !ok || !has || l <= prev {
				rising = false
				break
			}
			prev = l
		}
		if rising {
			first, _ := totalLag(ps[len(ps)-n-1])
			return st(IncidentHealth, "source lag grew at each of the last %d batches (%d → %d offsets): falling behind", n, first, prev)
		}
	}
	if ws.Verdict == Idle {
		return st(IdleSource, "%s for %s", ws.Verdict.Describe(), ws.StalledFor.Round(time.Second))
	}
	if len(ps) > 0 && v.InFlightSince.IsZero() {
		last := ps[len(ps)-1]
		if at, err := time.Parse(time.RFC3339Nano, last.Timestamp); err == nil && now.Sub(at) >= o.Stall {
			if l, known := totalLag(last); !known || l == 0 {
				return st(IdleSource, "no new input: no batch for %s and no lag", now.Sub(at).Round(time.Second))
			} else {
				return st(IncidentHealth, "no batch for %s while %d offsets wait", now.Sub(at).Round(time.Second), l)
			}
		}
	}
	return st(Healthy, "running")
}

func orNone(s string) string {
	if s == "" {
		return "no error recorded"
	}
	return s
}
