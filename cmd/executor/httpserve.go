package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/web"
)

// serveHTTP serves the executor's /metrics, /healthz and /readyz (ready
// while registered with the driver, with a valid lease) on addr, and
// /healthz and /readyz alone in plaintext on healthAddr; either may be
// empty.
func serveHTTP(ctx context.Context, addr, healthAddr string, src *tlsconf.Source, node *executor.Node, driver string, log *slog.Logger) (stop func(), err error) {
	stats := func() metrics.ExecutorStats {
		s := node.Stats()
		return metrics.ExecutorStats{
			MapTasks: s.MapTasks, ReduceTasks: s.ReduceTasks, TaskFailures: s.TaskFailures, RunningTasks: s.RunningTasks,
			ShuffleBytes: s.ShuffleBytes, StateRows: s.StateRows, Registered: s.Registered,
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewBuildInfo(),
		metrics.NewExecutorCollector(stats),
	)
	ready := func() error {
		if !node.Stats().Registered {
			return fmt.Errorf("not registered with the driver %s", driver)
		}
		return nil
	}
	stopHealth := func() {}
	if healthAddr != "" {
		if stopHealth, err = web.ServeHealth(ctx, healthAddr, "executor", ready, log); err != nil {
			return nil, err
		}
	}
	if addr == "" {
		return stopHealth, nil
	}
	ln, err := web.Listen(addr, src)
	if err != nil {
		stopHealth()
		return nil, err
	}
	log.Info("serving HTTP: /metrics, /healthz, /readyz", "address", ln.Addr().String())
	stopHTTP := web.Serve(ctx, ln, web.New(web.Options{Role: "executor", Ready: ready, Gatherer: reg, Logger: log}), log)
	return func() { stopHTTP(); stopHealth() }, nil
}
