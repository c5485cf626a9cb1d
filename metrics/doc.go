// Package metrics owns Sluice's Prometheus metric names, labels and
// meanings (README, "Metrics", lists them). Counters and histograms are
// fed with each committed batch's progress (Metrics.Observe); gauges are
// read at scrape time from a monitor.Tracker (TrackerCollector), so a
// scrape always agrees with the status page and the CLI. Executors expose
// their own figures (ExecutorCollector).
//
// Every per-query series carries the labels query (the name) and query_id
// (the id kept in the checkpoint), never a per-run id. It does not serve
// HTTP: package web does.
package metrics
