package monitor

import (
	"time"

	"github.com/sluicehq/sluice/progress"
)

// DefaultRateWindow is the window RecentRates summarises by default: the
// last minute, as Spark's UI summarises a query's input and processing
// rates over its recent batches rather than the last one alone.
const DefaultRateWindow = time.Minute

// Rates are a query's input and processing rates over a recent window.
// Unlike the last batch's rates they do not read 0 because the last batch
// happened to find no new data.
type Rates struct {
	// Window is the time the rates are taken over: the window, or the
	// time since the oldest kept batch started when that is shorter (a
	// query that started 10 s ago).
	Window time.Duration `json:"windowNs"`
	// Batches and InputRows count the batches that started within the
	// window and the rows they read.
	Batches   int   `json:"batches"`
	InputRows int64 `json:"inputRows"`
	// InputRowsPerSecond is InputRows over Window.
	InputRowsPerSecond float64 `json:"inputRowsPerSecond"`
	// ProcessedRowsPerSecond is InputRows over the time those batches
	// took (durationMs.triggerExecution): how fast the query gets through
	// rows while it works.
	ProcessedRowsPerSecond float64 `json:"processedRowsPerSecond"`
}

// RecentRates summarises ps (oldest first) at now over window (<= 0:
// DefaultRateWindow). A batch counts when its trigger started within the
// window; with none the rates are 0.
func RecentRates(ps []*progress.Report, now time.Time, window time.Duration) Rates {
	if window <= 0 {
		window = DefaultRateWindow
	}
	from := now.Add(-window)
	r := Rates{Window: window}
	if len(ps) == 0 {
		return r
	}
	if first, ok := progressStart(ps[0]); ok && first.After(from) {
		r.Window = max(now.Sub(first), time.Second)
	}
	var busyMs int64
	for i := len(ps) - 1; i >= 0; i-- {
		ts, ok := progressStart(ps[i])
		if !ok || ts.Before(from) {
			break
		}
		r.Batches++
		r.InputRows += ps[i].NumInputRows
		busyMs += ps[i].DurationMs["triggerExecution"]
	}
	r.InputRowsPerSecond = float64(r.InputRows) / r.Window.Seconds()
	if busyMs > 0 {
		r.ProcessedRowsPerSecond = float64(r.InputRows) / (float64(busyMs) / 1000)
	}
	return r
}

// progressStart is a batch's trigger start.
func progressStart(p *progress.Report) (time.Time, bool) {
	ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
	return ts, err == nil
}
