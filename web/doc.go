// Package web is the HTTP side of the driver and of executors, on one
// handler: /metrics (Prometheus), /healthz (the process is alive), /readyz
// (the caller's readiness check: 503 with the reason when not ready) and,
// when given a monitor.Tracker, the status page at / with its JSON API
// (/api/queries, /api/queries/NAME/progress).
//
// The page is rendered on the server (charts are inline SVG) and its two
// assets (a style sheet and a small refresh script) are embedded in the
// binary: clusters are often offline, so it fetches nothing from anywhere
// else, and its Content-Security-Policy forbids the browser to.
//
// NewHealth is the handler of a health port (--health-addr): /healthz and
// /readyz alone, served in plaintext beside a mutual-TLS HTTP port for
// probes that hold no client certificate.
//
// It only reads the Tracker; it never changes a query. Listen is the one
// place an HTTP listener is created (TLS wraps it there).
package web
