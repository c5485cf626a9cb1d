package main

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/query"
)

// serveQuery builds one query and runs it on the driver's executors (the
// demo's embedded cluster; driver serve goes through package driver).
func serveQuery(ctx context.Context, drv *cluster.Driver, spec query.Spec, minExecutors int, opts engine.Options) error {
	job, err := engine.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	runner, err := drv.NewRunner(cluster.RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: opts.Logger, Hook: opts.Hook, MinExecutors: minExecutors})
	if err != nil {
		return err
	}
	start := time.Now()
	err = job.RunWith(ctx, runner)
	st := runner.Stats()
	opts.Logger.Info("query stopped", "query", spec.Name, "id", job.Query.QueryID(), "batches", st.Batches, "inputRows", st.InputRows,
		"shuffleBytes", st.ShuffleBytes, "shuffleRecords", st.ShuffleRecords, "mapRetries", st.MapRetries, "seconds", time.Since(start).Seconds())
	return err
}
