package main

// A minimal, temporary HTTP server for `driver serve --http-addr`: /healthz,
// /readyz and a /metrics with one 0/1 gauge per query state. The web branch
// owns this file's real implementation (status page, full metrics).

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

func serveHTTP(ctx context.Context, addr string, tr *monitor.Tracker, ready func() error, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		b.WriteString("# HELP sluice_query_state Observed state of each query (1 for the current state).\n# TYPE sluice_query_state gauge\n")
		for _, v := range tr.List() {
			for _, s := range monitor.States {
				val := 0
				if v.State == s {
					val = 1
				}
				fmt.Fprintf(&b, "sluice_query_state{query=%q,query_id=%q,state=%q} %d\n", v.Name, v.ID, s, val)
			}
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, b.String())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	log.Info("http listening", "address", ln.Addr().String())
	return func() { srv.Close() }, nil
}
