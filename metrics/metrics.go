package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/progress"
)

// Label names of per-query series.
const (
	LabelQuery   = "query"
	LabelQueryID = "query_id"
)

// Metrics holds the counters and histograms fed by each batch's progress,
// registered on a caller's registerer.
type Metrics struct {
	batches        *prometheus.CounterVec
	inputRows      *prometheus.CounterVec
	outputRows     *prometheus.CounterVec
	malformed      *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	retries        *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	phase          *prometheus.CounterVec
	shuffleBytes   *prometheus.CounterVec
	skippedOffsets *prometheus.CounterVec
	tooFarAhead    *prometheus.CounterVec
	watermarkJumps *prometheus.CounterVec
	joinUnmatched  *prometheus.CounterVec
	retainDeleted  *prometheus.CounterVec
	retainErrors   *prometheus.CounterVec
	duplicates     *prometheus.CounterVec
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	q := []string{LabelQuery, LabelQueryID}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string(nil), q...), extra...))
	}
	m := &Metrics{
		batches:        counter("sluice_batches_total", "Committed micro-batches, by kind (data, no_data, rerun).", "kind"),
		inputRows:      counter("sluice_input_rows_total", "Records read by committed batches, malformed included."),
		outputRows:     counter("sluice_output_rows_total", "Rows written to the sink by committed batches."),
		malformed:      counter("sluice_malformed_rows_total", "Records set aside as malformed."),
		dropped:        counter("sluice_rows_dropped_by_watermark_total", "Row-window pairs dropped as later than the watermark."),
		retries:        counter("sluice_batch_retries_total", "Batch attempts beyond the first (retryable failures)."),
		phase:          counter("sluice_batch_phase_seconds_total", "Seconds spent in each phase of committed batches (map, reduce, addBatch, commitOffsets, triggerExecution).", "phase"),
		shuffleBytes:   counter("sluice_shuffle_bytes_total", "Bytes map tasks shuffled between executors."),
		skippedOffsets: counter("sluice_source_skipped_offsets_total", "Offsets skipped because the source lost them (failOnDataLoss: false)."),
		tooFarAhead:    counter("sluice_rows_too_far_ahead_total", "Records set aside as malformed because their event time was more than watermark.maxEventTimeAhead ahead of the batch."),
		watermarkJumps: counter("sluice_watermark_jumps_total", "Batches that moved the watermark by more than watermark.maxJump."),
		joinUnmatched:  counter("sluice_join_unmatched_rows_total", "Rows whose join key matched no row of the join's dimension snapshot (kept with nulls by a left join, dropped by an inner one)."),
		retainDeleted:  counter("sluice_checkpoint_cleanup_deleted_total", "Checkpoint objects (log entries, state files) the background cleaner deleted (minBatchesToRetain)."),
		retainErrors:   counter("sluice_checkpoint_cleanup_errors_total", "Background checkpoint cleanup passes that failed (logged; batches are unaffected)."),
		duplicates:     counter("sluice_dropped_duplicate_rows_total", "Rows dropped by a deduplication within the watermark (Spark's numDroppedDuplicateRows)."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_batch_duration_seconds", Help: "Duration of committed batches, trigger start to commit (Spark's triggerExecution).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, q),
	}
	reg.MustRegister(m.batches, m.inputRows, m.outputRows, m.malformed, m.dropped, m.retries, m.duration,
		m.phase, m.shuffleBytes, m.skippedOffsets, m.tooFarAhead, m.watermarkJumps, m.joinUnmatched, m.retainDeleted, m.retainErrors, m.duplicates)
	return m
}

// Observe records one committed batch's progress.
func (m *Metrics) Observe(p *progress.Report) {
	q, id := p.Name, p.ID
	kind := "data"
	switch {
	case p.Rerun:
		kind = "rerun"
	case p.NoData:
		kind = "no_data"
	}
	m.batches.WithLabelValues(q, id, kind).Inc()
	m.inputRows.WithLabelValues(q, id).Add(float64(p.NumInputRows))
	m.outputRows.WithLabelValues(q, id).Add(float64(p.Sink.NumOutputRows))
	m.malformed.WithLabelValues(q, id).Add(float64(p.NumRowsMalformed))
	m.shuffleBytes.WithLabelValues(q, id).Add(float64(p.ShuffleBytes))
	m.retries.WithLabelValues(q, id).Add(float64(max(p.Attempts-1, 0)))
	m.tooFarAhead.WithLabelValues(q, id).Add(float64(p.NumRowsTooFarAhead))
	if j := p.Join; j != nil {
		m.joinUnmatched.WithLabelValues(q, id).Add(float64(j.NumRowsUnmatched))
	}
	if jumps := m.watermarkJumps.WithLabelValues(q, id); p.WatermarkJumpMs > 0 {
		jumps.Inc()
	}
	m.retainDeleted.WithLabelValues(q, id).Add(float64(p.RetentionDeleted))
	m.retainErrors.WithLabelValues(q, id).Add(float64(p.RetentionErrors))
	var dropped, dups int64
	for _, s := range p.StateOperators {
		dropped += s.NumRowsDroppedByWatermark
		dups += s.CustomMetrics["numDroppedDuplicateRows"]
	}
	m.dropped.WithLabelValues(q, id).Add(float64(dropped))
	m.duplicates.WithLabelValues(q, id).Add(float64(dups))
	for phase, ms := range p.DurationMs {
		m.phase.WithLabelValues(q, id, phase).Add(seconds(ms))
	}
	if ms, ok := p.DurationMs["triggerExecution"]; ok {
		m.duration.WithLabelValues(q, id).Observe(seconds(ms))
	}
	var skipped int64
	for _, s := range p.Sources {
		skipped += s.Metrics["skippedOffsets"]
	}
	m.skippedOffsets.WithLabelValues(q, id).Add(float64(skipped))
}

func seconds(ms int64) float64 { return (time.Duration(ms) * time.Millisecond).Seconds() }

// Lag sums up a progress's source lag: the total over partitions, the
// smallest and largest partition lag, and each partition's (keys are the
// source's partition names, e.g. "topic-3"). ok is false when the source
// reports no lag (file and generator sources).
type Lag struct {
	Total, Min, Max int64
	Partitions      map[string]int64
}

// SourceLag reads the lag a progress reports.
func SourceLag(p *progress.Report) (Lag, bool) {
	var l Lag
	ok := false
	first := true
	for _, s := range p.Sources {
		for k, v := range s.Metrics {
			switch {
			case k == "totalLag":
				l.Total += v
				ok = true
			case strings.HasPrefix(k, "lag."):
				if l.Partitions == nil {
					l.Partitions = map[string]int64{}
				}
				l.Partitions[strings.TrimPrefix(k, "lag.")] = v
				if first || v < l.Min {
					l.Min = v
				}
				if first || v > l.Max {
					l.Max = v
				}
				first = false
			}
		}
	}
	return l, ok
}
