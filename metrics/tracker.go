package metrics

import (
	"runtime/debug"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/row"
)

// TrackerOptions configure a TrackerCollector.
type TrackerOptions struct {
	// PartitionLag adds sluice_source_partition_lag_offsets, one series per
	// source partition (off by default: a topic of many partitions makes
	// many series).
	PartitionLag bool
	// Stall is how long a watermark may stay put before
	// sluice_watermark_verdict calls it stalled (default 5m).
	Stall time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// TrackerCollector reads a monitor.Tracker at scrape time: query states,
// the last batch's gauges, restarts, registered executors and object-store
// requests.
type TrackerCollector struct {
	tr   *monitor.Tracker
	opts TrackerOptions

	state, desired, restarts, lastBatch, lastBatchTime           *prometheus.Desc
	inRate, procRate, watermark, maxEventTime, stateRows, stateB *prometheus.Desc
	lag, lagMin, lagMax, partLag, verdict, stalled, health       *prometheus.Desc
	executors, storeReqs, storeErrs, storeBytes                  *prometheus.Desc
	budgetExceeded                                               *prometheus.Desc
}

// NewTrackerCollector returns a collector of tr's figures.
func NewTrackerCollector(tr *monitor.Tracker, opts TrackerOptions) *TrackerCollector {
	if opts.Stall <= 0 {
		opts.Stall = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	q := []string{LabelQuery, LabelQueryID}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(append([]string(nil), q...), extra...), nil)
	}
	return &TrackerCollector{
		tr: tr, opts: opts,
		state:          d("sluice_query_state", "1 for the query's observed state, 0 for the others (PENDING, STARTING, RUNNING, RECOVERING, STOPPING, STOPPED, FINISHED, FAILED).", "state"),
		desired:        d("sluice_query_desired_state", "1 for the state the registry asks for (running, stopped), 0 for the other.", "state"),
		restarts:       d("sluice_query_restarts_total", "Times the query started again after RECOVERING or an end state, in this driver process."),
		lastBatch:      d("sluice_last_batch_id", "Id of the last committed batch."),
		lastBatchTime:  d("sluice_last_batch_timestamp_seconds", "Trigger start of the last committed batch, seconds since the epoch."),
		inRate:         d("sluice_input_rows_per_second", "Rows of the last batch over the seconds since the previous batch started (Spark's inputRowsPerSecond)."),
		procRate:       d("sluice_processed_rows_per_second", "Rows of the last batch over its duration (Spark's processedRowsPerSecond)."),
		watermark:      d("sluice_watermark_seconds", "The watermark the last batch evicted with, seconds since the epoch."),
		maxEventTime:   d("sluice_max_event_time_seconds", "The largest event time the last data batch read, seconds since the epoch."),
		stateRows:      d("sluice_state_rows", "Rows in the aggregation state after the last batch."),
		stateB:         d("sluice_state_memory_bytes", "Estimated memory of the aggregation state after the last batch."),
		lag:            d("sluice_source_lag_offsets", "Offsets between the last batch's end and the source's latest, summed over partitions (sources that report lag: Kafka)."),
		lagMin:         d("sluice_source_lag_min_offsets", "The smallest partition lag after the last batch."),
		lagMax:         d("sluice_source_lag_max_offsets", "The largest partition lag after the last batch."),
		partLag:        d("sluice_source_partition_lag_offsets", "Lag of one source partition after the last batch (only with per-partition lag turned on).", "partition"),
		verdict:        d("sluice_watermark_verdict", "1 for the watermark's verdict (none, advancing, idle, incident, stalled_with_input), 0 for the others.", "verdict"),
		health:         d("sluice_query_health", "1 for the query's health (healthy, idle, incident, inactive), 0 for the others; the reason is on the status page and in driver status.", "health"),
		stalled:        d("sluice_watermark_stalled_seconds", "Seconds the watermark has stayed put, when longer than the stall threshold; else 0."),
		budgetExceeded: d("sluice_state_budget_exceeded", "1 when the state passed the query's stateBudget after the last batch, else 0 (queries with a stateBudget only)."),
		executors:      prometheus.NewDesc("sluice_executors_registered", "Executors registered with this driver.", nil, nil),
		storeReqs:      prometheus.NewDesc("sluice_objstore_requests_total", "Object-store requests, by store role and operation (failed ones included).", []string{"store", "operation"}, nil),
		storeErrs:      prometheus.NewDesc("sluice_objstore_errors_total", "Object-store requests that failed, by store role and operation (not-found and already-exists answers are not errors).", []string{"store", "operation"}, nil),
		storeBytes:     prometheus.NewDesc("sluice_objstore_bytes_total", "Object bytes read (get) or written (put, put_if_absent), by store role and operation.", []string{"store", "operation"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *TrackerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.desired, c.restarts, c.lastBatch, c.lastBatchTime, c.inRate, c.procRate,
		c.watermark, c.maxEventTime, c.stateRows, c.stateB, c.lag, c.lagMin, c.lagMax, c.partLag, c.verdict, c.stalled, c.health,
		c.executors, c.storeReqs, c.storeErrs, c.storeBytes, c.budgetExceeded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *TrackerCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := c.opts.Now()
	for _, v := range c.tr.List() {
		q, id := v.Name, v.ID
		for _, s := range monitor.States {
			gauge(c.state, b2f(v.State == s), q, id, string(s))
		}
		if v.Desired != "" {
			for _, s := range []monitor.Desired{monitor.DesiredRunning, monitor.DesiredStopped} {
				gauge(c.desired, b2f(v.Desired == s), q, id, string(s))
			}
		}
		if v.Health != nil {
			for _, h := range monitor.Healths {
				gauge(c.health, b2f(v.Health.Health == h), q, id, string(h))
			}
		}
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(v.Restarts), q, id)
		ws := monitor.ClassifyWatermark(c.tr.Progress(q, 0), now, c.opts.Stall)
		for _, vd := range monitor.Verdicts {
			gauge(c.verdict, b2f(ws.Verdict == vd), q, id, string(vd))
		}
		gauge(c.stalled, ws.StalledFor.Seconds(), q, id)
		p := v.Latest
		if p == nil {
			continue
		}
		gauge(c.lastBatch, float64(p.BatchID), q, id)
		if ts, err := time.Parse(time.RFC3339Nano, p.Timestamp); err == nil {
			gauge(c.lastBatchTime, float64(ts.UnixMilli())/1000, q, id)
		}
		gauge(c.inRate, p.InputRowsPerSecond, q, id)
		gauge(c.procRate, p.ProcessedRowsPerSecond, q, id)
		gauge(c.watermark, float64(p.BatchWatermarkMs)/1000, q, id)
		if us, ok := maxEventTime(c.tr, q); ok {
			gauge(c.maxEventTime, float64(us)/1e6, q, id)
		}
		if len(p.StateOperators) > 0 {
			var rows, bytes int64
			for _, s := range p.StateOperators {
				rows += s.NumRowsTotal
				bytes += s.MemoryUsedBytes
			}
			gauge(c.stateRows, float64(rows), q, id)
			gauge(c.stateB, float64(bytes), q, id)
		}
		if sb := p.StateBudget; sb != nil {
			gauge(c.budgetExceeded, b2f(sb.Exceeded), q, id)
		}
		if l, ok := SourceLag(p); ok {
			gauge(c.lag, float64(l.Total), q, id)
			gauge(c.lagMin, float64(l.Min), q, id)
			gauge(c.lagMax, float64(l.Max), q, id)
			if c.opts.PartitionLag {
				parts := make([]string, 0, len(l.Partitions))
				for k := range l.Partitions {
					parts = append(parts, k)
				}
				sort.Strings(parts)
				for _, k := range parts {
					gauge(c.partLag, float64(l.Partitions[k]), q, id, k)
				}
			}
		}
	}
	if n, known := c.tr.Executors(); known {
		gauge(c.executors, float64(n))
	}
	stats := c.tr.StoreStats()
	roles := make([]string, 0, len(stats))
	for r := range stats {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, role := range roles {
		for op, s := range stats[role] {
			ch <- prometheus.MustNewConstMetric(c.storeReqs, prometheus.CounterValue, float64(s.Requests), role, op)
			ch <- prometheus.MustNewConstMetric(c.storeErrs, prometheus.CounterValue, float64(s.Errors-s.Answers), role, op)
			ch <- prometheus.MustNewConstMetric(c.storeBytes, prometheus.CounterValue, float64(s.Bytes), role, op)
		}
	}
}

// maxEventTime is the largest event time (µs) of the query's recent data
// batches: no-data batches read nothing and report none.
func maxEventTime(tr *monitor.Tracker, name string) (int64, bool) {
	ps := tr.Progress(name, 0)
	for i := len(ps) - 1; i >= 0; i-- {
		if s, ok := ps[i].EventTime["max"]; ok {
			if us, ok := row.ParseTimestamp([]byte(s)); ok {
				return us, true
			}
		}
	}
	return 0, false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NewBuildInfo returns sluice_build_info: a constant 1 labelled with the
// module version, the VCS revision and the Go version the binary was built
// from ("unknown" where the build did not record it).
func NewBuildInfo() prometheus.Collector {
	version, revision, goVersion := "unknown", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "A constant 1, labelled with the version, VCS revision and Go version of this binary.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 })
}
