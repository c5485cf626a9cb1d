package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/fault"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/statestore"
)

func newRunCmd() *cobra.Command {
	var file, progressJSON, metricsAddr string
	var allowFirst, allowReplay bool
	var sourceRetry time.Duration
	var stateMemoryLimit int64
	var s3 objstore.S3Options
	cmd := &cobra.Command{
		Use:   "run -f QUERY.yaml",
		Short: "Run one query in this process until its trigger stops (availableNow, once) or SIGINT/SIGTERM",
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return fmt.Errorf("run: -f QUERY.yaml is required")
			}
			spec, err := query.Load(file)
			if err != nil {
				return err
			}
			progress, closeProgress, err := progressWriter(progressJSON)
			if err != nil {
				return err
			}
			defer closeProgress()
			if metricsAddr != "" {
				observe, stop, err := serveMetrics(metricsAddr)
				if err != nil {
					return err
				}
				defer stop()
				progress = chain(progress, observe)
			}
			if stateMemoryLimit < 0 {
				return fmt.Errorf("--state-memory-limit %d is negative: give bytes, or 0 for no limit", stateMemoryLimit)
			}
			return runSpec(cmd, spec, engine.Options{
				StateMemoryLimit: statestore.NewMemoryLimit(stateMemoryLimit),
				Store:            objstore.Options{S3: s3},
				AllowFirstStart:  allowFirst,
				SourceRetryFor:   sourceRetry,
				AllowReplay:      allowReplay,
				Progress:         progress,
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	cmd.Flags().StringVar(&progressJSON, "progress-json", "", "append one JSON progress object per batch to this file")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9464)")
	cmd.Flags().BoolVar(&allowFirst, "allow-first-start", false, "let a production query start on an empty checkpoint (a first start)")
	cmd.Flags().BoolVar(&allowReplay, "allow-replay", false, "let a production query start on an empty checkpoint (an intended replay)")
	cmd.Flags().DurationVar(&sourceRetry, "source-retry-for", 5*time.Minute, "keep retrying this long when the source is unreachable (a broker down) before failing")
	cmd.Flags().Int64Var(&stateMemoryLimit, "state-memory-limit", 0, "bytes of state the in-memory state store (stateStore: memory) may hold; past it a batch fails with advice to switch to stateStore: pebble (0: no limit)")
	cliflags.S3(cmd.Flags(), &s3)
	return cmd
}

// runSpec builds and runs a query, printing one line per batch on stderr.
func runSpec(cmd *cobra.Command, spec query.Spec, opts engine.Options) error {
	ctx := cmd.Context()
	hook, err := fault.FromEnv()
	if err != nil {
		return err
	}
	opts.Hook = hook
	opts.Logger = logger(cmd)
	opts.Stdout = cmd.OutOrStdout()
	next := opts.Progress
	opts.Progress = func(p *scheduler.Progress) {
		fmt.Fprintln(os.Stderr, p.Line())
		if next != nil {
			next(p)
		}
	}
	job, err := engine.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	return job.Run(ctx)
}

// progressWriter appends progress objects as JSON lines to path.
func progressWriter(path string) (func(*scheduler.Progress), func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open --progress-json: %w", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(f)
	return func(p *scheduler.Progress) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(p)
		_ = f.Sync()
	}, func() { f.Close() }, nil
}

// chain calls both progress callbacks (either may be nil).
func chain(a, b func(*scheduler.Progress)) func(*scheduler.Progress) {
	return func(p *scheduler.Progress) {
		if a != nil {
			a(p)
		}
		if b != nil {
			b(p)
		}
	}
}

// serveMetrics serves /metrics on addr and returns the progress observer.
func serveMetrics(addr string) (func(*scheduler.Progress), func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return m.Observe, func() { srv.Close() }, nil
}
