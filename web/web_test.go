package web

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func get(t *testing.T, srv *httptest.Server, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func observe(tr *monitor.Tracker, name string, batch ids.BatchID, sec int, rows, lag int64, wmMs int64) {
	tr.Observe(&progress.Report{
		Name: name, ID: "id-" + name, BatchID: batch, Timestamp: t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano),
		NumInputRows: rows, InputRowsPerSecond: float64(rows), ProcessedRowsPerSecond: float64(rows) * 4,
		DurationMs:       map[string]int64{"map": 30, "reduce": 20, "addBatch": 70, "commitOffsets": 10, "triggerExecution": 80},
		BatchWatermarkMs: wmMs, EventTime: map[string]string{"max": "2026-03-02T09:31:00Z", "watermark": "x"},
		StateOperators: []progress.StateOperator{{NumRowsTotal: 12}},
		Sources:        []progress.Source{{Metrics: map[string]int64{"totalLag": lag, "lag.t-0": lag}}},
	})
}

func TestHandlerServesHealthReadinessMetricsAndThePage(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	tr := monitor.New(monitor.Options{Now: func() time.Time { return now }})
	ref := monitor.Ref{Name: "tile", ID: "id-tile"}
	tr.SetDesired(ref, monitor.DesiredRunning, 1)
	tr.SetState(ref, monitor.Running, nil)
	for i := range 5 {
		observe(tr, "tile", ids.BatchID(40+i), i*10, 100, int64(10+i*100), 1_772_442_000_000) // lag grows, watermark stays
	}
	idle := monitor.Ref{Name: "idle-files", ID: "id-idle-files"}
	tr.SetState(idle, monitor.Recovering, errors.New("list lab/in: permission denied"))
	observe(tr, "idle-files", 3, 0, 7, 0, 1_772_442_000_000)
	quiet := monitor.Ref{Name: "quiet", ID: "id-quiet"}
	tr.SetState(quiet, monitor.Running, nil)
	observe(tr, "quiet", 9, 0, 7, 0, 0) // no watermark, no lag, nothing for 10 minutes
	tr.SetExecutors(2)

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewTrackerCollector(tr, metrics.TrackerOptions{Now: func() time.Time { return now }}))
	var notReady error = errors.New("standby: another driver holds the lease")
	srv := httptest.NewServer(New(Options{Tracker: tr, Gatherer: reg, Ready: func() error { return notReady }, Now: func() time.Time { return now }}))
	defer srv.Close()

	if code, body, _ := get(t, srv, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body, _ := get(t, srv, "/readyz"); code != 503 || !strings.Contains(body, "another driver holds the lease") {
		t.Fatalf("/readyz while standby: %d %q", code, body)
	}
	notReady = nil
	if code, body, _ := get(t, srv, "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Fatalf("/readyz when ready: %d %q", code, body)
	}
	if code, body, _ := get(t, srv, "/metrics"); code != 200 || !strings.Contains(body, `sluice_query_state{query="tile",query_id="id-tile",state="RUNNING"} 1`) {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}

	code, page, hdr := get(t, srv, "/")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %s", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("CSP %q", hdr.Get("Content-Security-Policy"))
	}
	for _, want := range []string{
		`data-batch="44"`, `data-batch="40"`, "RUNNING", "RECOVERING", "list lab/in: permission denied",
		"Incident:", "lag grew from 10 to 410", // tile: stalled 10 minutes while lag grows
		"Idle source:",                                                  // idle-files: stalled, no input, no lag
		`class="health incident"`, "batch retries failing: list lab/in", // idle-files is RECOVERING
		`class="health idle"`, "Idle source:</strong> no new input: no batch for 10m0s and no lag", // quiet
		"<svg", "2 executors",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	assertLocalOnly(t, page)
	for _, asset := range []string{"/assets/style.css", "/assets/page.js"} {
		code, body, _ := get(t, srv, asset)
		if code != 200 || len(body) < 100 {
			t.Fatalf("%s: %d, %d bytes", asset, code, len(body))
		}
		assertLocalOnly(t, body)
	}

	_, body, _ := get(t, srv, "/api/queries")
	var list struct {
		Queries []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			Watermark struct {
				Verdict string `json:"verdict"`
			} `json:"watermark"`
			Health struct {
				Health string `json:"health"`
			} `json:"health"`
		} `json:"queries"`
		Executors int `json:"executors"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Queries) != 3 || list.Queries[2].Name != "tile" || list.Queries[2].Watermark.Verdict != "incident" || list.Queries[2].Health.Health != "incident" ||
		list.Queries[1].Health.Health != "idle" || list.Executors != 2 {
		t.Fatalf("/api/queries: %s", body)
	}
	_, body, _ = get(t, srv, "/api/queries/tile/progress?n=2")
	var ps []progress.Report
	if err := json.Unmarshal([]byte(body), &ps); err != nil || len(ps) != 2 || ps[1].BatchID != 44 {
		t.Fatalf("progress n=2: %v %s", err, body)
	}
	if code, _, _ := get(t, srv, "/api/queries/nope/progress"); code != 404 {
		t.Fatalf("unknown query: %d", code)
	}
	if code, body, _ := get(t, srv, "/api/queries/tile/progress?n=-1"); code != 400 || !strings.Contains(body, "n=") {
		t.Fatalf("bad n: %d %q", code, body)
	}
}

func TestExecutorHandlerHasNoPageButHealthAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewExecutorCollector(func() metrics.ExecutorStats { return metrics.ExecutorStats{Registered: true} }))
	srv := httptest.NewServer(New(Options{Role: "executor", Gatherer: reg, Ready: func() error { return errors.New("not registered with 127.0.0.1:7077") }}))
	defer srv.Close()
	if code, body, _ := get(t, srv, "/readyz"); code != 503 || !strings.Contains(body, "not registered") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, body, _ := get(t, srv, "/metrics"); code != 200 || !strings.Contains(body, "sluice_executor_registered 1") {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if code, body, _ := get(t, srv, "/"); code != 200 || !strings.Contains(body, "/metrics") {
		t.Fatalf("/: %d %q", code, body)
	}
	if code, _, _ := get(t, srv, "/api/queries"); code != 404 {
		t.Fatalf("/api/queries on an executor: %d", code)
	}
}

func TestHealthHandlerServesOnlyHealthAndReadiness(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewExecutorCollector(func() metrics.ExecutorStats { return metrics.ExecutorStats{Registered: true} }))
	ready := errors.New("standby: another driver holds the lease")
	tr := monitor.New(monitor.Options{})
	observe(tr, "tile", 1, 0, 10, 0, 0)
	srv := httptest.NewServer(NewHealth(Options{Role: "driver", Tracker: tr, Gatherer: reg, Ready: func() error { return ready }}))
	defer srv.Close()
	if code, body, _ := get(t, srv, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body, _ := get(t, srv, "/readyz"); code != 503 || !strings.Contains(body, "standby") {
		t.Fatalf("/readyz not ready: %d %q", code, body)
	}
	ready = nil
	if code, body, _ := get(t, srv, "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Fatalf("/readyz ready: %d %q", code, body)
	}
	// Nothing else: no metrics, no page, no query data, no assets, even
	// when the options carry them.
	for _, p := range []string{"/", "/metrics", "/api/queries", "/api/queries/tile/progress", "/assets/style.css"} {
		if code, body, _ := get(t, srv, p); code != 404 {
			t.Errorf("%s on the health port: %d %q, want 404", p, code, body)
		}
	}
}

// urlRe finds absolute and protocol-relative URLs in HTML, CSS and JS.
var urlRe = regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.\-\[\]:]+`)

// assertLocalOnly fails when text references a URL off this machine.
func assertLocalOnly(t *testing.T, text string) {
	t.Helper()
	for _, u := range urlRe.FindAllString(text, -1) {
		host := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(u), "http:"), "https:"), "//")
		if !strings.HasPrefix(host, "127.0.0.1") && !strings.HasPrefix(host, "localhost") && !strings.HasPrefix(host, "[::1]") {
			t.Errorf("references a non-local URL: %q", u)
		}
	}
}

func TestChartHandlesEmptyFlatAndMissingValues(t *testing.T) {
	for _, c := range []chart{
		{Title: "empty"},
		{Title: "flat", Series: []series{{Name: "a", Class: "s1", Values: []float64{5, 5, 5}}}},
		{Title: "one", Series: []series{{Name: "a", Class: "s1", Values: []float64{3}}}},
		{Title: "stacked", Stacked: true, Series: []series{{Name: "a", Class: "s1", Values: []float64{1, 2}}, {Name: "b", Class: "s2", Values: []float64{1, 0}}}},
	} {
		svg := string(c.SVG())
		if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>") || strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("%s: %s", c.Title, svg)
		}
	}
}

// A query past its stateBudget is marked on the page with the message; one
// within it shows the budget.
func TestPageShowsTheStateBudget(t *testing.T) {
	tr := monitor.New(monitor.Options{Now: func() time.Time { return t0 }})
	for _, c := range []struct {
		name string
		sb   *progress.StateBudget
	}{
		{"over", &progress.StateBudget{MaxRows: 10, OnExceed: "stop", Exceeded: true, Message: "state budget exceeded: operator stateStoreSave holds 12 rows"}},
		{"within", &progress.StateBudget{MaxRows: 100, MaxBytes: 4096, OnExceed: "flag"}},
	} {
		tr.SetState(monitor.Ref{Name: c.name, ID: "id-" + c.name}, monitor.Running, nil)
		observe(tr, c.name, 1, 0, 5, 0, 0)
		p := tr.Progress(c.name, 1)[0]
		q := *p
		q.BatchID, q.StateBudget = 2, c.sb
		tr.Observe(&q)
	}
	srv := httptest.NewServer(New(Options{Tracker: tr, Now: func() time.Time { return t0 }}))
	defer srv.Close()
	_, page, _ := get(t, srv, "/")
	for _, want := range []string{`<span class="budget over">exceeded</span>`, "operator stateStoreSave holds 12 rows",
		`<span class="budget">within</span>`, "maxRows 100, maxBytes 4096, onExceed flag"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// The duration chart's axis is in the unit its title names: seconds, as
// bare numbers, its top label the longest batch (the phases stacked).
func TestDurationChartAxisIsInSecondsLikeItsTitle(t *testing.T) {
	var ps []*progress.Report
	longest := 0.0
	for i, ms := range [][4]int64{{30, 20, 10, 80}, {120, 300, 40, 700}, {3, 2, 1, 9}} { // map, reduce, commitOffsets, triggerExecution
		ps = append(ps, &progress.Report{BatchID: ids.BatchID(i), DurationMs: map[string]int64{"map": ms[0], "reduce": ms[1], "commitOffsets": ms[2], "triggerExecution": ms[3]}})
		longest = max(longest, float64(ms[3])/1000)
	}
	var c *chart
	for _, ch := range charts(ps) {
		if strings.HasPrefix(ch.Title, "Batch duration by phase") {
			c = &ch
		}
	}
	if c == nil || !strings.HasSuffix(c.Title, "(s)") {
		t.Fatalf("no duration chart titled in seconds: %+v", c)
	}
	svg := string(c.SVG())
	labels := regexp.MustCompile(`<text class="ylab"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
	if len(labels) != 3 {
		t.Fatalf("%d axis labels:\n%s", len(labels), svg)
	}
	for _, l := range labels {
		if _, err := strconv.ParseFloat(l[1], 64); err != nil {
			t.Errorf("axis label %q is not a number of seconds", l[1])
		}
	}
	if top, _ := strconv.ParseFloat(labels[2][1], 64); math.Abs(top-longest) > 1e-9 {
		t.Errorf("top axis label %s s, want the longest batch, %v s", labels[2][1], longest)
	}
	if !strings.Contains(svg, "<title>reduce 0.3 s</title>") {
		t.Errorf("a bar's tooltip lacks its value in seconds:\n%s", svg)
	}
}

// The top of the page shows the rates over the last minute: a last batch
// that found no data does not make them 0.
func TestPageRatesAreOverTheLastMinute(t *testing.T) {
	now := t0.Add(time.Hour)
	tr := monitor.New(monitor.Options{Now: func() time.Time { return now }})
	tr.SetState(monitor.Ref{Name: "tile", ID: "id-tile"}, monitor.Running, nil)
	var rows int64
	for i := range 12 { // a batch every 10 s for two minutes, the last empty
		n := int64(600 + 10*i)
		if i == 11 {
			n = 0
		}
		start := now.Add(time.Duration(i-12)*10*time.Second + time.Second)
		if now.Sub(start) <= time.Minute {
			rows += n
		}
		tr.Observe(&progress.Report{Name: "tile", ID: "id-tile", BatchID: ids.BatchID(i), Timestamp: start.Format(time.RFC3339Nano),
			NumInputRows: n, NoData: n == 0, DurationMs: map[string]int64{"triggerExecution": 500}})
	}
	srv := httptest.NewServer(New(Options{Tracker: tr, Now: func() time.Time { return now }}))
	defer srv.Close()
	_, page, _ := get(t, srv, "/")
	want := compact(float64(rows) / 60)
	row := regexp.MustCompile(`(?s)<td><a href="#q-tile">tile</a></td>.*?</tr>`).FindString(page)
	if !strings.Contains(row, `<td class="num">`+want+`</td>`) {
		t.Errorf("the queries table's tile row lacks input rows/s %s (%d rows over the last minute):\n%s", want, rows, row)
	}
	if !strings.Contains(page, `<dd class="rate-in">`+want+`</dd>`) || !strings.Contains(page, "(last 1m0s)") {
		t.Errorf("the query's facts lack input rows/s %s over the last minute", want)
	}
}
