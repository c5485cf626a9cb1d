package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/fault"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
)

func newServeCmd() *cobra.Command {
	var opts cluster.DriverOptions
	var files []string
	var tokenFile, progressJSON string
	var exitWhenDone, allowFirst, allowReplay bool
	var minExecutors int
	var s3 objstore.S3Options
	var sourceRetry time.Duration
	var tlsFlags tlsconf.Config
	var hc httpConfig
	cmd := &cobra.Command{
		Use:   "serve --query QUERY.yaml [--query ...]",
		Short: "Serve the driver service and run the given queries on the executors that register (SIGINT/SIGTERM stops)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			log := logger(cmd)
			if len(files) == 0 {
				return fmt.Errorf("serve: at least one --query FILE is required (submitting to a running driver is not available yet)")
			}
			var specs []query.Spec
			for _, f := range files {
				s, err := query.Load(f)
				if err != nil {
					return err
				}
				specs = append(specs, s)
			}
			tok, err := cluster.LoadToken(tokenFile)
			if err != nil {
				return err
			}
			opts.Token, opts.Logger, opts.Insecure = tok, log, tlsFlags.Insecure
			if opts.TLS, err = tlsconf.Open(tlsFlags); err != nil {
				return err
			}
			if tok == "" && (opts.TLS == nil || !opts.TLS.Mutual()) {
				log.Warn("no cluster token (--token-file or " + cluster.TokenEnv + ") and no mutual TLS (--tls-ca): any process that reaches the listen address can join; fine on loopback only")
			}
			hook, err := fault.FromEnv()
			if err != nil {
				return err
			}
			progress, closeProgress, err := progressWriter(progressJSON)
			if err != nil {
				return err
			}
			defer closeProgress()
			tr := monitor.New(monitor.Options{})
			progress = chain(progress, tr.Observe)
			drv, err := cluster.NewDriver(opts)
			if err != nil {
				return err
			}
			log.Info("driver listening", "address", drv.Addr())
			if hc.Addr != "" {
				hc.TLS = opts.TLS
				// Ready once the driver serves executors (there is no
				// registry or lease yet).
				stop, err := serveHTTPWith(ctx, hc, tr, func() error { return nil }, log)
				if err != nil {
					return err
				}
				defer stop()
				go trackExecutors(ctx, tr, drv)
			}
			serveCtx, stopServe := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- drv.Serve(serveCtx) }()

			var wg sync.WaitGroup
			errs := make([]error, len(specs))
			for i, spec := range specs {
				wg.Go(func() {
					errs[i] = serveQueryTracked(ctx, drv, tr, spec, minExecutors, engine.Options{
						Logger: log, Hook: hook, Stdout: cmd.OutOrStdout(), WrapStore: countStores(tr),
						Store: objstore.Options{S3: s3}, SourceRetryFor: sourceRetry,
						AllowFirstStart: allowFirst, AllowReplay: allowReplay,
						Progress: func(p *scheduler.Progress) {
							fmt.Fprintln(os.Stderr, p.Line())
							if progress != nil {
								progress(p)
							}
						},
					})
					if errs[i] != nil {
						log.Error("query failed", "query", spec.Name, "err", errs[i])
					}
				})
			}
			wg.Wait()
			if !exitWhenDone {
				<-ctx.Done()
			}
			stopServe()
			if err := <-served; err != nil {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&files, "query", nil, "query spec to run (YAML or JSON); repeatable")
	f.StringVar(&opts.Listen, "listen", cluster.DefaultDriverListen, "address to serve executors and the CLI on")
	f.StringVar(&tokenFile, "token-file", "", "file holding the cluster token (default: $"+cluster.TokenEnv+")")
	f.DurationVar(&opts.HeartbeatTimeout, "heartbeat-timeout", 5*time.Second, "remove an executor silent for this long")
	f.IntVar(&minExecutors, "min-executors", 1, "executors that must register before a query's first batch")
	f.BoolVar(&exitWhenDone, "exit-when-done", false, "exit once every query has stopped (availableNow, once) instead of serving on")
	f.StringVar(&progressJSON, "progress-json", "", "append one JSON progress object per batch to this file")
	cliflags.ProductionGuards(f, &allowFirst, &allowReplay)
	addHTTPFlags(f, &hc, "")
	f.DurationVar(&sourceRetry, "source-retry-for", 5*time.Minute, "keep retrying this long when the source or a store is unreachable before failing")
	cliflags.S3(f, &s3)
	tlsFlags.Register(f)
	return cmd
}

// serveQuery builds one query and runs it on the driver's executors.
func serveQuery(ctx context.Context, drv *cluster.Driver, spec query.Spec, minExecutors int, opts engine.Options) error {
	return serveQueryTracked(ctx, drv, monitor.New(monitor.Options{}), spec, minExecutors, opts)
}

// serveQueryTracked is serveQuery recording the query's states in tr.
func serveQueryTracked(ctx context.Context, drv *cluster.Driver, tr *monitor.Tracker, spec query.Spec, minExecutors int, opts engine.Options) (err error) {
	ref := monitor.Ref{Name: spec.Name}
	tr.SetDesired(ref, monitor.DesiredRunning, 0)
	tr.SetState(ref, monitor.Starting, nil)
	defer func() { tr.SetState(ref, endState(ctx, err), err) }()
	job, err := engine.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	ref.ID = job.Query.QueryID()
	tr.SetState(ref, monitor.Running, nil)
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
