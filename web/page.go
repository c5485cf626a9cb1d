package web

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// page is what the status page template renders.
type page struct {
	Role      string
	Now       string
	Ready     bool
	NotReady  string
	Executors string // "" when unknown
	Queries   []queryPage
	Stall     string
}

type queryPage struct {
	monitor.View
	Anchor     string
	StateClass string
	Since      string
	ErrorAt    string
	Verdict    monitor.WatermarkStatus
	VerdictTxt string
	VerdictCls string
	Last       *batchRow
	Batches    []batchRow // newest first
	Charts     []chart
}

type batchRow struct {
	ID        ids.BatchID
	Time      string
	Kind      string
	Rows      int64
	Out       int64
	InRate    string
	ProcRate  string
	Phases    []string // phaseNames order
	Total     string
	Watermark string
	MaxEvent  string
	StateRows string
	// Budget is the stateBudget ("maxRows 10, onExceed flag") and
	// BudgetOver its message when the state passed it.
	Budget     string
	BudgetOver string
	Lag        string
	Attempts   int
	NoData     bool
	Rerun      bool
	Timestamp  time.Time
	triggerSec float64
}

// phaseNames are the durations shown per batch, in order.
var phaseNames = []string{"map", "reduce", "addBatch", "commitOffsets"}

var funcs = template.FuncMap{
	"phases": func() []string { return phaseNames },
	"rate":   rate,
	"window": func(d time.Duration) string { return d.Round(time.Second).String() },
	"short": func(id string) string {
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
}

func (s *server) pageData() page {
	now := s.opts.Now()
	p := page{Role: s.opts.Role, Now: now.UTC().Format("2006-01-02 15:04:05 UTC"), Ready: true, Stall: s.opts.Stall.String()}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			p.Ready, p.NotReady = false, err.Error()
		}
	}
	if n, known := s.opts.Tracker.Executors(); known {
		p.Executors = strconv.Itoa(n)
	}
	for _, v := range s.opts.Tracker.List() {
		ps := s.opts.Tracker.Progress(v.Name, 0)
		ws := monitor.ClassifyWatermark(ps, now, s.opts.Stall)
		q := queryPage{
			View: v, Anchor: "q-" + anchor(v.Name), StateClass: strings.ToLower(string(v.State)),
			Since: ago(now, v.StateSince), Verdict: ws, VerdictTxt: ws.Verdict.Describe(),
			VerdictCls: strings.ReplaceAll(string(ws.Verdict), "_", "-"),
		}
		if !v.LastErrorAt.IsZero() {
			q.ErrorAt = v.LastErrorAt.UTC().Format("15:04:05") + " (" + ago(now, v.LastErrorAt) + ")"
		}
		rows := make([]batchRow, len(ps))
		for i, pr := range ps {
			rows[i] = toRow(pr)
		}
		if len(rows) > 0 {
			last := rows[len(rows)-1]
			// The max event time shown is the largest seen in the kept
			// batches: a batch of no rows (or only malformed ones) has none.
			last.MaxEvent = ""
			for _, r := range rows {
				if r.MaxEvent > last.MaxEvent {
					last.MaxEvent = r.MaxEvent
				}
			}
			q.Last = &last
		}
		for i := len(rows) - 1; i >= 0 && len(q.Batches) < s.opts.Batches; i-- {
			q.Batches = append(q.Batches, rows[i])
		}
		q.Charts = charts(ps)
		p.Queries = append(p.Queries, q)
	}
	return p
}

func toRow(p *progress.Report) batchRow {
	r := batchRow{ID: p.BatchID, Rows: p.NumInputRows, Out: p.Sink.NumOutputRows, Attempts: p.Attempts, NoData: p.NoData, Rerun: p.Rerun,
		InRate: rate(p.InputRowsPerSecond), ProcRate: rate(p.ProcessedRowsPerSecond), Total: dur(p.DurationMs["triggerExecution"])}
	r.Kind = "data"
	switch {
	case p.Rerun:
		r.Kind = "re-run"
	case p.NoData:
		r.Kind = "no data"
	}
	if ts, err := time.Parse(time.RFC3339Nano, p.Timestamp); err == nil {
		r.Timestamp = ts
		r.Time = ts.UTC().Format("15:04:05")
	}
	for _, ph := range phaseNames {
		if v, ok := p.DurationMs[ph]; ok {
			r.Phases = append(r.Phases, dur(v))
		} else {
			r.Phases = append(r.Phases, "–")
		}
	}
	r.Watermark = eventTime(p.BatchWatermarkMs * 1000)
	if s, ok := p.EventTime["max"]; ok {
		if us, ok := row.ParseTimestamp([]byte(s)); ok {
			r.MaxEvent = eventTime(us)
		}
	}
	if len(p.StateOperators) > 0 {
		var n int64
		for _, s := range p.StateOperators {
			n += s.NumRowsTotal
		}
		r.StateRows = strconv.FormatInt(n, 10)
	}
	if sb := p.StateBudget; sb != nil {
		r.Budget = (&query.StateBudget{MaxRows: sb.MaxRows, MaxBytes: sb.MaxBytes, OnExceed: sb.OnExceed}).String()
		if sb.Exceeded {
			r.BudgetOver = sb.Message
		}
	}
	if l, ok := metrics.SourceLag(p); ok {
		r.Lag = strconv.FormatInt(l.Total, 10)
	}
	return r
}

// charts draws the query's history: rates, duration by phase, watermark
// against max event time, state rows and source lag.
func charts(ps []*progress.Report) []chart {
	n := len(ps)
	var xl [2]string
	if n > 0 {
		xl = [2]string{fmt.Sprintf("batch %d", ps[0].BatchID), fmt.Sprintf("batch %d", ps[n-1].BatchID)}
	}
	vals := func(f func(*progress.Report) (float64, bool)) []float64 {
		out := make([]float64, n)
		for i, p := range ps {
			if v, ok := f(p); ok {
				out[i] = v
			} else {
				out[i] = math.NaN()
			}
		}
		return out
	}
	phase := func(name string) func(*progress.Report) (float64, bool) {
		return func(p *progress.Report) (float64, bool) { v, ok := p.DurationMs[name]; return float64(v) / 1000, ok }
	}
	other := func(p *progress.Report) (float64, bool) {
		v := p.DurationMs["triggerExecution"] - p.DurationMs["map"] - p.DurationMs["reduce"] - p.DurationMs["commitOffsets"]
		return float64(max(v, 0)) / 1000, true
	}
	var maxSeen float64
	maxEvent := func(p *progress.Report) (float64, bool) {
		if s, ok := p.EventTime["max"]; ok {
			if us, ok := row.ParseTimestamp([]byte(s)); ok {
				maxSeen = math.Max(maxSeen, float64(us)/1e6)
			}
		}
		return maxSeen, maxSeen > 0
	}
	hasState, hasLag := false, false
	for _, p := range ps {
		hasState = hasState || len(p.StateOperators) > 0
		_, ok := metrics.SourceLag(p)
		hasLag = hasLag || ok
	}
	out := []chart{
		{Title: "Input and processing rate (rows/s)", XLabels: xl, Series: []series{
			{Name: "input rows/s", Class: "s1", Values: vals(func(p *progress.Report) (float64, bool) { return p.InputRowsPerSecond, true })},
			{Name: "processed rows/s", Class: "s2", Values: vals(func(p *progress.Report) (float64, bool) { return p.ProcessedRowsPerSecond, true })},
		}},
		{Title: "Batch duration by phase (s)", XLabels: xl, Stacked: true, FmtY: plainSeconds, Unit: "s", Series: []series{
			{Name: "map", Class: "s1", Values: vals(phase("map"))},
			{Name: "reduce", Class: "s2", Values: vals(phase("reduce"))},
			{Name: "plan + sink commit", Class: "s3", Values: vals(other)},
			{Name: "commit offsets", Class: "s4", Values: vals(phase("commitOffsets"))},
		}},
		{Title: "Watermark and max event time", XLabels: xl, FmtY: clock, Series: []series{
			{Name: "max event time seen", Class: "s2", Values: vals(maxEvent)},
			{Name: "watermark", Class: "s1", Values: vals(func(p *progress.Report) (float64, bool) {
				return float64(p.BatchWatermarkMs) / 1000, p.BatchWatermarkMs != 0
			})},
		}},
		{Title: "Input rows per batch", XLabels: xl, Stacked: true, Series: []series{
			{Name: "rows", Class: "s1", Values: vals(func(p *progress.Report) (float64, bool) { return float64(p.NumInputRows), true })},
		}},
	}
	if hasState {
		out = append(out, chart{Title: "State rows", XLabels: xl, Series: []series{{Name: "state rows", Class: "s3", Values: vals(func(p *progress.Report) (float64, bool) {
			var t int64
			for _, s := range p.StateOperators {
				t += s.NumRowsTotal
			}
			return float64(t), len(p.StateOperators) > 0
		})}}})
	}
	if hasLag {
		out = append(out, chart{Title: "Source lag (offsets)", XLabels: xl, Series: []series{
			{Name: "total", Class: "s4", Values: vals(func(p *progress.Report) (float64, bool) {
				l, ok := metrics.SourceLag(p)
				return float64(l.Total), ok
			})},
			{Name: "max partition", Class: "s2", Values: vals(func(p *progress.Report) (float64, bool) { l, ok := metrics.SourceLag(p); return float64(l.Max), ok })},
		}})
	}
	return out
}

func anchor(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

func rate(v float64) string {
	if v == 0 {
		return "0"
	}
	return compact(v)
}

func dur(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return trim(float64(ms)/1000) + " s"
}

// plainSeconds renders seconds as a bare number of seconds (the chart's
// title carries the unit): 0.004, 0.25, 1.5, 12.
func plainSeconds(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < 0.1:
		return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 3, 64), "0"), ".")
	default:
		return trim(v)
	}
}

// clock renders seconds since the epoch as a UTC time of day (dates are
// in the table).
func clock(v float64) string {
	return time.Unix(int64(v), 0).UTC().Format("15:04:05")
}

// eventTime renders an event time (µs) compactly, in UTC.
func eventTime(us int64) string {
	if us == 0 {
		return "–"
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05")
}
