package monitor

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
)

// batchAt is a progress object of rows rows whose trigger started at ts
// and took ms.
func batchAt(id int, ts time.Time, rows, ms int64) *progress.Report {
	return &progress.Report{Name: "q", BatchID: ids.BatchID(id), Timestamp: ts.Format(time.RFC3339Nano), NumInputRows: rows, NoData: rows == 0,
		DurationMs: map[string]int64{"triggerExecution": ms}}
}

func TestRecentRatesSummariseTheLastMinuteNotTheLastBatch(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// An hour of batches every 10 s, each 1000 rows in 250 ms; the last
	// one (started 5 s ago) found nothing.
	var hour []*progress.Report
	for i := 0; i < 360; i++ {
		start := now.Add(time.Duration(i-360)*10*time.Second + 5*time.Second)
		rows := int64(1000)
		if i == 359 {
			rows = 0
		}
		hour = append(hour, batchAt(i, start, rows, 250))
	}
	for _, c := range []struct {
		name                 string
		ps                   []*progress.Report
		window               time.Duration
		batches              int
		rows                 int64
		inPerSec, procPerSec float64
		span                 time.Duration
	}{
		// Starts at -55 s .. -5 s: six batches, five with rows.
		{"last batch empty", hour, 0, 6, 5000, 5000.0 / 60, 5000 / (6 * 0.25), time.Minute},
		{"a longer window", hour, 5 * time.Minute, 30, 29000, 29000.0 / 300, 29000 / (30 * 0.25), 5 * time.Minute},
		// A query started 20 s ago: the rate is over those 20 s.
		{"young query", []*progress.Report{batchAt(0, now.Add(-20*time.Second), 400, 100), batchAt(1, now.Add(-10*time.Second), 600, 100)},
			0, 2, 1000, 1000.0 / 20, 1000 / 0.2, 20 * time.Second},
		// Nothing for two minutes: 0, whatever the last batch read.
		{"quiet", []*progress.Report{batchAt(0, now.Add(-3*time.Minute), 400, 100), batchAt(1, now.Add(-2*time.Minute), 600, 100)},
			0, 0, 0, 0, 0, time.Minute},
		{"none", nil, 0, 0, 0, 0, 0, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := RecentRates(c.ps, now, c.window)
			if r.Batches != c.batches || r.InputRows != c.rows || r.Window != c.span ||
				math.Abs(r.InputRowsPerSecond-c.inPerSec) > 1e-9 || math.Abs(r.ProcessedRowsPerSecond-c.procPerSec) > 1e-9 {
				t.Fatalf("RecentRates = %+v; want %d batches, %d rows over %v: %.3f and %.3f rows/s", r, c.batches, c.rows, c.span, c.inPerSec, c.procPerSec)
			}
		})
	}
}

// The tracker's views carry the rates, so the page, the metrics' readers
// and `driver status` show the same figure.
func TestViewsCarryTheRecentRates(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tr := New(Options{Now: func() time.Time { return now }})
	tr.Observe(batchAt(0, now.Add(-30*time.Second), 3000, 500))
	tr.Observe(batchAt(1, now.Add(-2*time.Second), 0, 10))
	v, _ := tr.Get("q")
	if v.Rates == nil || v.Rates.InputRows != 3000 || v.Rates.InputRowsPerSecond != 100 {
		t.Fatalf("view rates %+v; want 3000 rows over 30 s", v.Rates)
	}
	if l := tr.List(); len(l) != 1 || l[0].Rates == nil || *l[0].Rates != *v.Rates {
		t.Fatalf("List rates %+v, Get %+v", l[0].Rates, v.Rates)
	}
}
