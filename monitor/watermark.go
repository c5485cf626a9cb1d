package monitor

import (
	"time"

	"github.com/sluicehq/sluice/progress"
)

// Verdict says whether a query's watermark is moving and, when it is not,
// why.
type Verdict string

// Verdicts of ClassifyWatermark.
const (
	// NoWatermark: the query has no watermark (yet): nothing to judge.
	NoWatermark Verdict = "none"
	// Advancing: the watermark moved within the stall threshold.
	Advancing Verdict = "advancing"
	// Idle: the watermark is stalled and no new input arrived: an idle
	// source, not a fault.
	Idle Verdict = "idle"
	// Incident: the watermark is stalled while the source lag grows (or
	// data waits and nothing is read): the query is not getting through.
	Incident Verdict = "incident"
	// StalledWithInput: the watermark is stalled although rows arrive (and
	// the lag is not growing): their event times do not move it forward,
	// e.g. a producer sending old or late events.
	StalledWithInput Verdict = "stalled_with_input"
)

// Verdicts lists every verdict (for one 0/1 gauge per verdict).
var Verdicts = []Verdict{NoWatermark, Advancing, Idle, Incident, StalledWithInput}

// Describe says the verdict in one plain sentence for an operator.
func (v Verdict) Describe() string {
	switch v {
	case Advancing:
		return "watermark advancing"
	case Idle:
		return "watermark stalled: the source is idle (no new input)"
	case Incident:
		return "INCIDENT: watermark stalled while the source lag grows"
	case StalledWithInput:
		return "watermark stalled although rows arrive: their event times do not move it"
	default:
		return "no watermark"
	}
}

// WatermarkStatus is a verdict with the figures behind it.
type WatermarkStatus struct {
	Verdict Verdict `json:"verdict"`
	// Since is when the current watermark was first used by a batch
	// (zero when unknown).
	Since time.Time `json:"since,omitzero"`
	// StalledFor is now - Since when stalled, else 0.
	StalledFor time.Duration `json:"stalledForNs"`
	// LagFrom and LagTo are the source lag (total) at the first and the
	// last batch since Since; LagKnown is false for sources without lag.
	LagFrom, LagTo int64 `json:"-"`
	LagKnown       bool  `json:"-"`
	// RowsSince are the input rows of the batches after Since.
	RowsSince int64 `json:"rowsSince"`
}

// ClassifyWatermark judges a query's watermark from its recent progress
// (oldest first) at time now. The watermark is stalled when it has not
// changed for at least stall (measured from the first batch that used the
// current value; a watermark that was never seen to change counts from the
// oldest progress given). Stalled, it is an Incident when the source lag at
// the last batch is above the lag at the first batch of the stall, or when
// data waits (lag above zero) and no batch since has read a row; Idle when
// no batch since then read a row and no lag is reported; and
// StalledWithInput otherwise (rows arrive but do not move it). It is pure: every input is an argument.
func ClassifyWatermark(ps []*progress.Report, now time.Time, stall time.Duration) WatermarkStatus {
	if len(ps) == 0 {
		return WatermarkStatus{Verdict: NoWatermark}
	}
	last := ps[len(ps)-1]
	if last.BatchWatermarkMs == 0 {
		return WatermarkStatus{Verdict: NoWatermark}
	}
	first := len(ps) - 1
	for first > 0 && ps[first-1].BatchWatermarkMs == last.BatchWatermarkMs {
		first--
	}
	st := WatermarkStatus{Verdict: Advancing}
	since, err := time.Parse(time.RFC3339Nano, ps[first].Timestamp)
	if err != nil {
		return st
	}
	st.Since = since
	if now.Sub(since) < stall {
		return st
	}
	st.StalledFor = now.Sub(since)
	for _, p := range ps[first+1:] {
		st.RowsSince += p.NumInputRows
	}
	st.LagFrom, st.LagKnown = totalLag(ps[first])
	var known bool
	st.LagTo, known = totalLag(last)
	st.LagKnown = st.LagKnown && known
	switch {
	case st.LagKnown && st.LagTo > st.LagFrom, known && st.LagTo > 0 && st.RowsSince == 0:
		st.Verdict = Incident
	case st.RowsSince == 0 && (!known || st.LagTo == 0):
		st.Verdict = Idle
	default:
		st.Verdict = StalledWithInput
	}
	return st
}

func totalLag(p *progress.Report) (int64, bool) {
	var sum int64
	ok := false
	for _, s := range p.Sources {
		if v, has := s.Metrics["totalLag"]; has {
			sum += v
			ok = true
		}
	}
	return sum, ok
}
