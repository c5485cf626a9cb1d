// Package monitor keeps what is known about each query a driver runs: its
// desired state (from the registry), its observed state (PENDING, STARTING,
// RUNNING, RECOVERING, STOPPING, STOPPED, FINISHED, FAILED) with the last
// error, and its recent progress, from which every view carries the
// query's health and its rates over the last minute (RecentRates, as
// Spark's UI summarises a query). The CLI's status and progress commands,
// the status page and the Prometheus collectors all read one Tracker, so
// they never disagree.
//
// It performs no I/O and starts no goroutine; time comes from an injected
// clock.
package monitor
