package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
)

// driver status shows the state's memory, the approx_count_distinct
// sketches' cost and the state budget.
func TestStatusShowsStateCostAndBudget(t *testing.T) {
	p := &progress.Report{BatchID: 3, EventTime: map[string]string{},
		StateOperators: []progress.StateOperator{{NumRowsTotal: 40, MemoryUsedBytes: 40 * 300,
			CustomMetrics: map[string]int64{"approxCountDistinctSketches": 80, "approxCountDistinctMaxBytes": 80 * progress.HLLSketchMaxBytes}}},
		StateBudget: &progress.StateBudget{MaxRows: 30, OnExceed: "stop", Exceeded: true, Message: "state budget exceeded: operator stateStoreSave holds 40 rows"}}
	var b strings.Builder
	if err := writeStatus(&b, queryJSON{Name: "tile", Latest: p}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state rows:", "40", "state memory:", "12000 bytes (300 per row)",
		"approx_count_distinct:", "80 HyperLogLog sketches", "up to 1310720 bytes",
		"state budget:", "EXCEEDED: state budget exceeded: operator stateStoreSave holds 40 rows"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	p.StateBudget, p.StateOperators[0].CustomMetrics = &progress.StateBudget{MaxBytes: 1 << 20, OnExceed: "flag"}, nil
	b.Reset()
	_ = writeStatus(&b, queryJSON{Name: "tile", Latest: p})
	if !strings.Contains(b.String(), "within maxBytes 1048576, onExceed flag") || strings.Contains(b.String(), "approx_count_distinct") {
		t.Errorf("status:\n%s", b.String())
	}
}

// driver status shows the rates over the last minute (the driver's view
// carries them), not 0 after a batch that found no data.
func TestStatusShowsTheRatesOverTheLastMinute(t *testing.T) {
	data := &progress.Report{BatchID: 7, NumInputRows: 900, InputRowsPerSecond: 90, ProcessedRowsPerSecond: 1800, EventTime: map[string]string{}}
	empty := &progress.Report{BatchID: 8, NoData: true, EventTime: map[string]string{}}
	r := &monitor.Rates{Window: time.Minute, Batches: 4, InputRows: 2700, InputRowsPerSecond: 45, ProcessedRowsPerSecond: 1500}
	var b strings.Builder
	if err := writeStatus(&b, queryJSON{Name: "tile", Latest: empty, LastData: data, Rates: r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"input rate:", "45.0 rows/s over the last 1m0s (2700 rows in 4 batches; batch 7: 90.0 rows/s)",
		"processing rate:", "1500.0 rows/s over the time those batches took (batch 7: 1800.0 rows/s)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
