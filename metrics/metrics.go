// Package metrics exposes each batch's progress as Prometheus metrics, with
// the same figures as the progress report. It owns metric names and labels;
// it does not serve HTTP (the command wires a handler).
package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/scheduler"
)

// Metrics holds the collectors, registered on a caller's registerer.
type Metrics struct {
	batches        *prometheus.CounterVec
	inputRows      *prometheus.CounterVec
	outputRows     *prometheus.CounterVec
	malformed      *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	watermark      *prometheus.GaugeVec
	lastBatch      *prometheus.GaugeVec
	stateRows      *prometheus.GaugeVec
	stateMemory    *prometheus.GaugeVec
	lag            *prometheus.GaugeVec
	skippedOffsets *prometheus.CounterVec
	tooFarAhead    *prometheus.CounterVec
	watermarkJumps *prometheus.CounterVec
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	q := []string{"query"}
	m := &Metrics{
		batches:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_batches_total", Help: "Committed micro-batches, by kind (data, no_data, rerun)."}, []string{"query", "kind"}),
		inputRows:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_input_rows_total", Help: "Records read by committed batches, malformed included."}, q),
		outputRows:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_output_rows_total", Help: "Rows written to the sink."}, q),
		malformed:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rows_malformed_total", Help: "Records set aside as malformed."}, q),
		dropped:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rows_dropped_by_watermark_total", Help: "Row-window pairs dropped as later than the watermark."}, q),
		attempts:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_batch_retries_total", Help: "Batch attempts beyond the first."}, q),
		duration:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_batch_duration_seconds", Help: "Batch duration by phase.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"query", "phase"}),
		watermark:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_watermark_seconds", Help: "The watermark the last batch evicted with, seconds since the epoch."}, q),
		lastBatch:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_last_committed_batch", Help: "Id of the last committed batch."}, q),
		stateRows:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_state_rows", Help: "Rows in the aggregation state after the last batch."}, q),
		stateMemory:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_state_memory_bytes", Help: "Estimated memory of the aggregation state."}, q),
		lag:            prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_source_lag", Help: "Offsets between the last batch's end and the source's latest, per source partition."}, []string{"query", "partition"}),
		skippedOffsets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_source_skipped_offsets_total", Help: "Offsets skipped because the source lost them (failOnDataLoss: false)."}, q),
		tooFarAhead:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rows_too_far_ahead_total", Help: "Records set aside as malformed because their event time was more than watermark.maxEventTimeAhead ahead of the batch."}, q),
		watermarkJumps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_watermark_jumps_total", Help: "Batches that moved the watermark by more than watermark.maxJump."}, q),
	}
	reg.MustRegister(m.batches, m.inputRows, m.outputRows, m.malformed, m.dropped, m.attempts, m.duration,
		m.watermark, m.lastBatch, m.stateRows, m.stateMemory, m.lag, m.skippedOffsets, m.tooFarAhead, m.watermarkJumps)
	return m
}

// Observe records one committed batch's progress.
func (m *Metrics) Observe(p *scheduler.Progress) {
	q := p.Name
	kind := "data"
	switch {
	case p.Rerun:
		kind = "rerun"
	case p.NoData:
		kind = "no_data"
	}
	m.batches.WithLabelValues(q, kind).Inc()
	m.inputRows.WithLabelValues(q).Add(float64(p.NumInputRows))
	m.outputRows.WithLabelValues(q).Add(float64(p.Sink.NumOutputRows))
	m.malformed.WithLabelValues(q).Add(float64(p.NumRowsMalformed))
	m.tooFarAhead.WithLabelValues(q).Add(float64(p.NumRowsTooFarAhead))
	if p.WatermarkJumpMs > 0 {
		m.watermarkJumps.WithLabelValues(q).Inc()
	}
	if p.Attempts > 1 {
		m.attempts.WithLabelValues(q).Add(float64(p.Attempts - 1))
	}
	for phase, ms := range p.DurationMs {
		m.duration.WithLabelValues(q, phase).Observe((time.Duration(ms) * time.Millisecond).Seconds())
	}
	m.watermark.WithLabelValues(q).Set(float64(p.BatchWatermarkMs) / 1000)
	m.lastBatch.WithLabelValues(q).Set(float64(p.BatchID))
	for _, s := range p.StateOperators {
		m.stateRows.WithLabelValues(q).Set(float64(s.NumRowsTotal))
		m.stateMemory.WithLabelValues(q).Set(float64(s.MemoryUsedBytes))
		m.dropped.WithLabelValues(q).Add(float64(s.NumRowsDroppedByWatermark))
	}
	for _, s := range p.Sources {
		for k, v := range s.Metrics {
			switch {
			case k == "skippedOffsets":
				m.skippedOffsets.WithLabelValues(q).Add(float64(v))
			case strings.HasPrefix(k, "lag."):
				m.lag.WithLabelValues(q, strings.TrimPrefix(k, "lag.")).Set(float64(v))
			case k == "totalLag":
				m.lag.WithLabelValues(q, "total").Set(float64(v))
			}
		}
	}
}
