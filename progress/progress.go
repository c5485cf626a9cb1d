package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ids"
)

// Report is one batch's report, shaped like Spark's
// StreamingQueryProgress.
type Report struct {
	ID                     string            `json:"id"`
	RunID                  string            `json:"runId"`
	Name                   string            `json:"name"`
	Timestamp              string            `json:"timestamp"`
	BatchID                ids.BatchID       `json:"batchId"`
	Rerun                  bool              `json:"rerun,omitempty"`
	NoData                 bool              `json:"noData,omitempty"`
	NumInputRows           int64             `json:"numInputRows"`
	InputRowsPerSecond     float64           `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64           `json:"processedRowsPerSecond"`
	DurationMs             map[string]int64  `json:"durationMs"`
	EventTime              map[string]string `json:"eventTime"`
	StateOperators         []StateOperator   `json:"stateOperators"`
	Sources                []Source          `json:"sources"`
	Sink                   Sink              `json:"sink"`
	NumRowsMalformed       int64             `json:"numRowsMalformed"`
	// BadRecords is where this batch's malformed records went (empty when
	// there were none).
	BadRecords string `json:"badRecords,omitempty"`
	// NumRowsTooFarAhead counts the malformed rows set aside because their
	// event time was more than watermark.maxEventTimeAhead ahead.
	NumRowsTooFarAhead int64 `json:"numRowsTooFarAhead,omitempty"`
	// WatermarkJumpMs is how far this batch moved the watermark when that
	// was more than watermark.maxJump (0 otherwise); NumWatermarkJumps
	// counts such batches since the query (re)started.
	WatermarkJumpMs   int64 `json:"watermarkJumpMs,omitempty"`
	NumWatermarkJumps int64 `json:"numWatermarkJumps"`
	// RetentionDeleted counts the checkpoint objects (log entries, state
	// files) the background cleaner deleted since the previous batch's
	// report, and RetentionErrors the cleaner passes that failed (logged;
	// the batches are unaffected).
	RetentionDeleted int64 `json:"retentionDeleted,omitempty"`
	RetentionErrors  int64 `json:"retentionErrors,omitempty"`
	// BatchWatermarkMs is the watermark the batch evicted with and
	// LateWatermarkMs the one it dropped late rows against.
	BatchWatermarkMs int64 `json:"batchWatermarkMs"`
	LateWatermarkMs  int64 `json:"lateWatermarkMs"`
	Attempts         int   `json:"attempts"`
	// ShuffleBytes are the bytes the batch's map tasks shuffled between
	// executors (0 when tasks run in the driver's process).
	ShuffleBytes int64 `json:"shuffleBytes,omitempty"`
	// StateBudget is the query's stateBudget checked against the state
	// after this batch (absent when the query sets none).
	StateBudget *StateBudget `json:"stateBudget,omitempty"`
	// Join reports the stream-static join (absent without one).
	Join *Join `json:"join,omitempty"`
}

// Join reports a batch's stream-static join: the snapshot it
// joined against (from its offset-log entry) and the rows whose key found
// no dimension row (kept with nulls by a left join, dropped by an inner
// one).
type Join struct {
	ManifestID       string `json:"manifestId"`
	ManifestHash     string `json:"manifestHash"`
	NumRowsUnmatched int64  `json:"numRowsUnmatched"`
}

// StateBudget reports the state budget after a batch.
type StateBudget struct {
	MaxRows  int64  `json:"maxRows,omitempty"`
	MaxBytes int64  `json:"maxBytes,omitempty"`
	OnExceed string `json:"onExceed"`
	// Exceeded: the state passed the budget (the batch committed).
	Exceeded bool `json:"exceeded"`
	// Message names the operator, its rows and bytes and the budget when
	// Exceeded.
	Message string `json:"message,omitempty"`
}

// StateOperator reports one stateful operator.
type StateOperator struct {
	OperatorName              string `json:"operatorName"`
	NumRowsTotal              int64  `json:"numRowsTotal"`
	NumRowsUpdated            int64  `json:"numRowsUpdated"`
	NumRowsRemoved            int64  `json:"numRowsRemoved"`
	NumRowsDroppedByWatermark int64  `json:"numRowsDroppedByWatermark"`
	MemoryUsedBytes           int64  `json:"memoryUsedBytes"`
	NumShufflePartitions      int    `json:"numShufflePartitions"`
	NumStateStoreWrites       int    `json:"numStateStoreWrites"`
	// CustomMetrics are operator-specific figures, as in Spark: for a
	// query with approx_count_distinct measures,
	// approxCountDistinctSketches (one HyperLogLog sketch per state row and
	// measure) and approxCountDistinctMaxBytes (what they use at full
	// precision, 16 KiB each; sparse sketches use less, and their bytes
	// are in memoryUsedBytes).
	CustomMetrics map[string]int64 `json:"customMetrics,omitempty"`
}

// HLLSketchMaxBytes is the size of a full-precision (dense, p=14)
// HyperLogLog sketch of approx_count_distinct.
const HLLSketchMaxBytes = 1 << 14

// Source reports one source.
type Source struct {
	Description            string           `json:"description"`
	StartOffset            json.RawMessage  `json:"startOffset"`
	EndOffset              json.RawMessage  `json:"endOffset"`
	LatestOffset           json.RawMessage  `json:"latestOffset"`
	NumInputRows           int64            `json:"numInputRows"`
	InputRowsPerSecond     float64          `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64          `json:"processedRowsPerSecond"`
	Metrics                map[string]int64 `json:"metrics,omitempty"`
}

// Sink reports the sink.
type Sink struct {
	Description   string `json:"description"`
	NumOutputRows int64  `json:"numOutputRows"`
	Skipped       bool   `json:"skipped,omitempty"`
}

// Line renders the progress as one human-readable line.
func (p *Report) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch %d", p.BatchID)
	switch {
	case p.Rerun:
		b.WriteString(" (re-run)")
	case p.NoData:
		b.WriteString(" (no data)")
	}
	if p.NumRowsMalformed > 0 {
		fmt.Fprintf(&b, ": %d rows read (%d good, %d malformed)", p.NumInputRows, p.NumInputRows-p.NumRowsMalformed, p.NumRowsMalformed)
		if p.NumRowsTooFarAhead > 0 {
			fmt.Fprintf(&b, " (%d of them too far ahead)", p.NumRowsTooFarAhead)
		}
	} else {
		fmt.Fprintf(&b, ": %d rows", p.NumInputRows)
	}
	fmt.Fprintf(&b, " in %d ms (%.0f rows/s)", p.DurationMs["triggerExecution"], p.ProcessedRowsPerSecond)
	for _, s := range p.StateOperators {
		fmt.Fprintf(&b, ", state %d rows, %d late dropped", s.NumRowsTotal, s.NumRowsDroppedByWatermark)
	}
	if j := p.Join; j != nil {
		fmt.Fprintf(&b, ", joined with manifest %s (%d unmatched)", j.ManifestID, j.NumRowsUnmatched)
	}
	fmt.Fprintf(&b, ", %d out", p.Sink.NumOutputRows)
	if p.Sink.Skipped {
		b.WriteString(" (sink already had it)")
	}
	fmt.Fprintf(&b, ", watermark %s", p.EventTime["watermark"])
	if p.NumRowsMalformed > 0 && p.BadRecords != "" {
		fmt.Fprintf(&b, "; malformed records set aside in %s", p.BadRecords)
	}
	if p.WatermarkJumpMs > 0 {
		fmt.Fprintf(&b, " (then jumped %s)", time.Duration(p.WatermarkJumpMs)*time.Millisecond)
	}
	if sb := p.StateBudget; sb != nil && sb.Exceeded {
		fmt.Fprintf(&b, "; %s", sb.Message)
	}
	return b.String()
}

// InputRowsPerSecond is the rate at which a batch's rows arrived: its rows
// over the seconds from the previous batch's trigger start to this one's
// (Spark's inputRowsPerSecond, which divides by the time since the last
// trigger; here triggers that found nothing to run do not count, so the
// figure is the arrival rate over the whole gap). It is 0 for the first
// batch of a run (prev zero), as in Spark, where the gap is infinite.
func InputRowsPerSecond(rows int64, prev, start time.Time) float64 {
	if prev.IsZero() || !start.After(prev) {
		return 0
	}
	return float64(rows) / start.Sub(prev).Seconds()
}
