package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func report(batch ids.BatchID, sec int, rows int64, wmMs int64, lag int64) *progress.Report {
	return &progress.Report{
		Name: "tile", ID: "qid-1", RunID: "run-must-not-appear", BatchID: batch,
		Timestamp:    t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano),
		NumInputRows: rows, InputRowsPerSecond: float64(rows) / 2, ProcessedRowsPerSecond: float64(rows) * 10,
		NumRowsMalformed: 2, Attempts: 2, ShuffleBytes: 1000,
		BatchWatermarkMs: wmMs,
		DurationMs:       map[string]int64{"triggerExecution": 120, "map": 50},
		EventTime:        map[string]string{"max": "2026-03-02T09:20:30Z"},
		StateOperators:   []progress.StateOperator{{NumRowsTotal: 40, NumRowsDroppedByWatermark: 3, MemoryUsedBytes: 4096}},
		Sources:          []progress.Source{{Metrics: map[string]int64{"totalLag": lag, "lag.t-0": lag - 2, "lag.t-1": 2}}},
		Sink:             progress.Sink{NumOutputRows: 5},
	}
}

func TestObserveCountsEveryBatchWithQueryAndIDLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Observe(report(7, 0, 100, 1_772_443_260_000, 9))
	p := report(8, 2, 0, 1_772_443_320_000, 9)
	p.NoData, p.Attempts = true, 1
	m.Observe(p)
	want := `
# HELP sluice_input_rows_total Records read by committed batches, malformed included.
# TYPE sluice_input_rows_total counter
sluice_input_rows_total{query="tile",query_id="qid-1"} 100
# HELP sluice_batches_total Committed micro-batches, by kind (data, no_data, rerun).
# TYPE sluice_batches_total counter
sluice_batches_total{kind="data",query="tile",query_id="qid-1"} 1
sluice_batches_total{kind="no_data",query="tile",query_id="qid-1"} 1
# HELP sluice_batch_retries_total Batch attempts beyond the first (retryable failures).
# TYPE sluice_batch_retries_total counter
sluice_batch_retries_total{query="tile",query_id="qid-1"} 1
# HELP sluice_rows_dropped_by_watermark_total Row-window pairs dropped as later than the watermark.
# TYPE sluice_rows_dropped_by_watermark_total counter
sluice_rows_dropped_by_watermark_total{query="tile",query_id="qid-1"} 6
# HELP sluice_shuffle_bytes_total Bytes map tasks shuffled between executors.
# TYPE sluice_shuffle_bytes_total counter
sluice_shuffle_bytes_total{query="tile",query_id="qid-1"} 2000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_input_rows_total", "sluice_batches_total",
		"sluice_batch_retries_total", "sluice_rows_dropped_by_watermark_total", "sluice_shuffle_bytes_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.duration); n != 1 {
		t.Fatalf("duration histograms: %d, want 1", n)
	}
	if got := testutil.ToFloat64(m.phase.WithLabelValues("tile", "qid-1", "map")); got != 0.1 {
		t.Fatalf("map phase seconds = %v, want 0.1", got)
	}
	assertNoRunID(t, reg)
}

func TestTrackerCollectorReadsGaugesAtScrapeTime(t *testing.T) {
	now := t0.Add(10 * time.Second)
	tr := monitor.New(monitor.Options{Now: func() time.Time { return now }})
	ref := monitor.Ref{Name: "tile", ID: "qid-1"}
	tr.SetDesired(ref, monitor.DesiredRunning, 3)
	tr.SetState(ref, monitor.Starting, nil)
	tr.SetState(ref, monitor.Running, nil)
	tr.SetExecutors(2)
	cs := objstore.NewCounting(objstore.NewMem())
	tr.CountStore("checkpoint", cs)
	_ = cs.PutIfAbsent(context.Background(), "offsets/0", []byte("abcd"))
	_ = cs.PutIfAbsent(context.Background(), "offsets/0", []byte("abcd")) // exists: an answer, not an error
	fc := objstore.NewCounting(failing{})
	tr.CountStore("checkpoint", fc)
	_, _ = fc.Get(context.Background(), "x")

	reg := prometheus.NewRegistry()
	reg.MustRegister(NewTrackerCollector(tr, TrackerOptions{Now: func() time.Time { return now }, Stall: time.Minute}))
	p := report(7, 0, 100, 1_772_443_260_000, 9)
	p.StateBudget = &progress.StateBudget{MaxRows: 30, OnExceed: "flag", Exceeded: true, Message: "state budget exceeded"}
	tr.Observe(p) // after registering: read at scrape time

	want := `
# HELP sluice_query_state 1 for the query's observed state, 0 for the others (PENDING, STARTING, RUNNING, RECOVERING, STOPPING, STOPPED, FINISHED, FAILED).
# TYPE sluice_query_state gauge
sluice_query_state{query="tile",query_id="qid-1",state="FAILED"} 0
sluice_query_state{query="tile",query_id="qid-1",state="FINISHED"} 0
sluice_query_state{query="tile",query_id="qid-1",state="PENDING"} 0
sluice_query_state{query="tile",query_id="qid-1",state="RECOVERING"} 0
sluice_query_state{query="tile",query_id="qid-1",state="RUNNING"} 1
sluice_query_state{query="tile",query_id="qid-1",state="STARTING"} 0
sluice_query_state{query="tile",query_id="qid-1",state="STOPPED"} 0
sluice_query_state{query="tile",query_id="qid-1",state="STOPPING"} 0
# HELP sluice_watermark_seconds The watermark the last batch evicted with, seconds since the epoch.
# TYPE sluice_watermark_seconds gauge
sluice_watermark_seconds{query="tile",query_id="qid-1"} 1.77244326e+09
# HELP sluice_max_event_time_seconds The largest event time the last data batch read, seconds since the epoch.
# TYPE sluice_max_event_time_seconds gauge
sluice_max_event_time_seconds{query="tile",query_id="qid-1"} 1.77244323e+09
# HELP sluice_source_lag_offsets Offsets between the last batch's end and the source's latest, summed over partitions (sources that report lag: Kafka).
# TYPE sluice_source_lag_offsets gauge
sluice_source_lag_offsets{query="tile",query_id="qid-1"} 9
# HELP sluice_source_lag_max_offsets The largest partition lag after the last batch.
# TYPE sluice_source_lag_max_offsets gauge
sluice_source_lag_max_offsets{query="tile",query_id="qid-1"} 7
# HELP sluice_source_lag_min_offsets The smallest partition lag after the last batch.
# TYPE sluice_source_lag_min_offsets gauge
sluice_source_lag_min_offsets{query="tile",query_id="qid-1"} 2
# HELP sluice_input_rows_per_second Rows of the last batch over the seconds since the previous batch started (Spark's inputRowsPerSecond).
# TYPE sluice_input_rows_per_second gauge
sluice_input_rows_per_second{query="tile",query_id="qid-1"} 50
# HELP sluice_state_rows Rows in the aggregation state after the last batch.
# TYPE sluice_state_rows gauge
sluice_state_rows{query="tile",query_id="qid-1"} 40
# HELP sluice_state_budget_exceeded 1 when the state passed the query's stateBudget after the last batch, else 0 (queries with a stateBudget only).
# TYPE sluice_state_budget_exceeded gauge
sluice_state_budget_exceeded{query="tile",query_id="qid-1"} 1
# HELP sluice_executors_registered Executors registered with this driver.
# TYPE sluice_executors_registered gauge
sluice_executors_registered 2
# HELP sluice_objstore_requests_total Object-store requests, by store role and operation (failed ones included).
# TYPE sluice_objstore_requests_total counter
sluice_objstore_requests_total{operation="get",store="checkpoint"} 1
sluice_objstore_requests_total{operation="put_if_absent",store="checkpoint"} 2
# HELP sluice_objstore_errors_total Object-store requests that failed, by store role and operation (not-found and already-exists answers are not errors).
# TYPE sluice_objstore_errors_total counter
sluice_objstore_errors_total{operation="get",store="checkpoint"} 1
sluice_objstore_errors_total{operation="put_if_absent",store="checkpoint"} 0
# HELP sluice_watermark_verdict 1 for the watermark's verdict (none, advancing, idle, incident, stalled_with_input), 0 for the others.
# TYPE sluice_watermark_verdict gauge
sluice_watermark_verdict{query="tile",query_id="qid-1",verdict="advancing"} 1
sluice_watermark_verdict{query="tile",query_id="qid-1",verdict="idle"} 0
sluice_watermark_verdict{query="tile",query_id="qid-1",verdict="incident"} 0
sluice_watermark_verdict{query="tile",query_id="qid-1",verdict="none"} 0
sluice_watermark_verdict{query="tile",query_id="qid-1",verdict="stalled_with_input"} 0
`
	names := []string{"sluice_query_state", "sluice_watermark_seconds", "sluice_max_event_time_seconds", "sluice_source_lag_offsets",
		"sluice_source_lag_max_offsets", "sluice_source_lag_min_offsets", "sluice_input_rows_per_second", "sluice_state_rows",
		"sluice_state_budget_exceeded", "sluice_executors_registered", "sluice_objstore_requests_total", "sluice_objstore_errors_total", "sluice_watermark_verdict"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if got := gatherLabel(t, reg, "sluice_query_health", "health", "healthy"); got != 1 {
		t.Fatalf("healthy gauge = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_query_health"); err != nil || n != len(monitor.Healths) {
		t.Fatalf("sluice_query_health: %d series (%v), want one per health", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_source_partition_lag_offsets"); err != nil || n != 0 {
		t.Fatalf("per-partition lag without asking: %d series (%v)", n, err)
	}

	// A retryable failure, then a restart: the state gauges move, the
	// restarts counter grows; much later, with the lag grown, the verdict
	// is an incident.
	tr.SetState(ref, monitor.Recovering, errors.New("broker away"))
	tr.SetState(ref, monitor.Starting, nil)
	tr.Observe(report(8, 30, 10, 1_772_443_260_000, 900))
	now = t0.Add(5 * time.Minute)
	if got := gather(t, reg, "sluice_query_restarts_total", "tile"); got != 1 {
		t.Fatalf("restarts = %v", got)
	}
	if got := gatherLabel(t, reg, "sluice_watermark_verdict", "verdict", "incident"); got != 1 {
		t.Fatalf("incident verdict gauge = %v", got)
	}
	if got := gatherLabel(t, reg, "sluice_query_state", "state", "STARTING"); got != 1 {
		t.Fatalf("STARTING gauge = %v", got)
	}
	tr.SetState(ref, monitor.Running, nil)
	if got := gatherLabel(t, reg, "sluice_query_health", "health", "incident"); got != 1 {
		t.Fatalf("incident health gauge = %v", got)
	}

	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(NewTrackerCollector(tr, TrackerOptions{PartitionLag: true}))
	if got := gatherLabel(t, reg2, "sluice_source_partition_lag_offsets", "partition", "t-0"); got != 898 {
		t.Fatalf("partition lag t-0 = %v, want 898", got)
	}
	assertNoRunID(t, reg)
}

func TestExecutorCollectorAndBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := ExecutorStats{MapTasks: 3, ReduceTasks: 4, ShuffleBytes: 512, StateRows: 9, Registered: true}
	reg.MustRegister(NewExecutorCollector(func() ExecutorStats { return s }), NewBuildInfo())
	want := `
# HELP sluice_executor_tasks_total Tasks this executor completed, by kind (map, reduce).
# TYPE sluice_executor_tasks_total counter
sluice_executor_tasks_total{kind="map"} 3
sluice_executor_tasks_total{kind="reduce"} 4
# HELP sluice_executor_registered 1 while this executor is registered with a driver (its lease is valid), else 0.
# TYPE sluice_executor_registered gauge
sluice_executor_registered 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_executor_tasks_total", "sluice_executor_registered"); err != nil {
		t.Fatal(err)
	}
	s.Registered = false
	if got := gather(t, reg, "sluice_executor_registered", ""); got != 0 {
		t.Fatalf("registered after losing the lease = %v", got)
	}
	if got := gather(t, reg, "sluice_build_info", ""); got != 1 {
		t.Fatalf("build info = %v", got)
	}
}

// gather returns the value of the first series of name (whose query
// label is query, if given).
func gather(t *testing.T, reg *prometheus.Registry, name, query string) float64 {
	t.Helper()
	if query == "" {
		return gatherLabel(t, reg, name, "", "")
	}
	return gatherLabel(t, reg, name, LabelQuery, query)
}

func gatherLabel(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

func assertNoRunID(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "run-must-not-appear") || l.GetName() == "run_id" {
					t.Fatalf("%s carries the run id", mf.GetName())
				}
			}
		}
	}
}

// failing is a store whose every call fails with a fault.
type failing struct{ objstore.Store }

func (failing) Get(context.Context, string) ([]byte, error) {
	return nil, errors.New("connection reset")
}

// A query with a join counts the rows its key matched nothing for; a
// query without one has no such series.
func TestObserveCountsJoinUnmatchedRows(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Observe(report(7, 0, 100, 1_772_443_260_000, 9))
	if n := testutil.CollectAndCount(m.joinUnmatched); n != 0 {
		t.Fatalf("a query without a join has %d unmatched-row series", n)
	}
	for _, n := range []int64{3, 4} {
		p := report(7, 0, 100, 1_772_443_260_000, 9)
		p.Join = &progress.Join{ManifestID: "m1", NumRowsUnmatched: n}
		m.Observe(p)
	}
	if got := testutil.ToFloat64(m.joinUnmatched.WithLabelValues("tile", "qid-1")); got != 7 {
		t.Fatalf("sluice_join_unmatched_rows_total = %v, want 7", got)
	}
}

// A deduplication's dropped rows (its state operator's
// numDroppedDuplicateRows, Spark's custom metric) add up.
func TestObserveCountsDroppedDuplicateRows(t *testing.T) {
	m := New(prometheus.NewRegistry())
	for _, n := range []int64{5, 0, 6} {
		p := report(7, 0, 100, 1_772_443_260_000, 9)
		p.StateOperators = []progress.StateOperator{{OperatorName: "dedupeWithinWatermark", CustomMetrics: map[string]int64{"numDroppedDuplicateRows": n}}}
		m.Observe(p)
	}
	if got := testutil.ToFloat64(m.duplicates.WithLabelValues("tile", "qid-1")); got != 11 {
		t.Fatalf("sluice_dropped_duplicate_rows_total = %v, want 11", got)
	}
}
