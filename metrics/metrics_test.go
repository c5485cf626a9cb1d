package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/scheduler"
)

func TestObserveExportsProgressFigures(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Observe(&scheduler.Progress{
		Name: "tile", BatchID: 7, NumInputRows: 100, NumRowsMalformed: 2, Attempts: 2,
		NumRowsTooFarAhead: 1, WatermarkJumpMs: 90_000_000, NumWatermarkJumps: 1,
		BatchWatermarkMs: 1_772_443_260_000,
		DurationMs:       map[string]int64{"triggerExecution": 12},
		StateOperators:   []scheduler.StateOperatorProgress{{NumRowsTotal: 40, NumRowsDroppedByWatermark: 3, MemoryUsedBytes: 4096}},
		Sources:          []scheduler.SourceProgress{{Metrics: map[string]int64{"totalLag": 9, "lag.t-0": 9}}},
		Sink:             scheduler.SinkProgress{NumOutputRows: 5},
	})
	m.Observe(&scheduler.Progress{Name: "tile", BatchID: 8, NoData: true, BatchWatermarkMs: 1_772_443_320_000})
	want := `
# HELP sluice_input_rows_total Records read by committed batches, malformed included.
# TYPE sluice_input_rows_total counter
sluice_input_rows_total{query="tile"} 100
# HELP sluice_last_committed_batch Id of the last committed batch.
# TYPE sluice_last_committed_batch gauge
sluice_last_committed_batch{query="tile"} 8
# HELP sluice_watermark_seconds The watermark the last batch evicted with, seconds since the epoch.
# TYPE sluice_watermark_seconds gauge
sluice_watermark_seconds{query="tile"} 1.77244332e+09
# HELP sluice_source_lag Offsets between the last batch's end and the source's latest, per source partition.
# TYPE sluice_source_lag gauge
sluice_source_lag{partition="t-0",query="tile"} 9
sluice_source_lag{partition="total",query="tile"} 9
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_input_rows_total", "sluice_last_committed_batch", "sluice_watermark_seconds", "sluice_source_lag"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.batches.WithLabelValues("tile", "no_data")); got != 1 {
		t.Fatalf("no-data batches = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.watermarkJumps.WithLabelValues("tile")); got != 1 {
		t.Fatalf("watermark jumps = %v, want 1 (the second batch did not jump)", got)
	}
	if got := testutil.ToFloat64(m.tooFarAhead.WithLabelValues("tile")); got != 1 {
		t.Fatalf("rows too far ahead = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.attempts.WithLabelValues("tile")); got != 1 {
		t.Fatalf("retries = %v, want 1", got)
	}
}
