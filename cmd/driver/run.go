package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/scheduler"
)

func newRunCmd() *cobra.Command {
	var file, progressJSON, metricsAddr string
	var tlsFlags tlsconf.Config
	var allowFirst, allowReplay bool
	var sourceRetry time.Duration
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
			// Everything that can be checked is checked before any file
			// (progress, checkpoint, sink) is created.
			if err := engine.Check(spec); err != nil {
				return err
			}
			var observe func(*scheduler.Progress)
			if metricsAddr != "" { // before the progress file: a busy port creates nothing
				src, err := tlsconf.Open(tlsFlags)
				if err != nil {
					return err
				}
				var stop func()
				if observe, stop, err = serveMetrics(metricsAddr, src, logger(cmd)); err != nil {
					return err
				}
				defer stop()
			}
			progress, closeProgress, err := progressWriter(progressJSON)
			if err != nil {
				return err
			}
			defer closeProgress()
			if observe != nil {
				progress = chain(progress, observe)
			}
			return runSpec(cmd, spec, engine.Options{
				Store:           objstore.Options{S3: s3},
				AllowFirstStart: allowFirst,
				SourceRetryFor:  sourceRetry,
				AllowReplay:     allowReplay,
				Progress:        progress,
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	cmd.Flags().StringVar(&progressJSON, "progress-json", "", "append one JSON progress object per batch to this file")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9464)")
	cliflags.ProductionGuards(cmd.Flags(), &allowFirst, &allowReplay)
	cmd.Flags().DurationVar(&sourceRetry, "source-retry-for", 5*time.Minute, "keep retrying this long when the source is unreachable (a broker down) before failing")
	cliflags.S3(cmd.Flags(), &s3)
	tlsFlags.RegisterCerts(cmd.Flags())
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
		fmt.Fprintln(cmd.ErrOrStderr(), p.Line())
		if next != nil {
			next(p)
		}
	}
	if opts.Idle == nil {
		opts.Idle = func(i scheduler.Idle) { fmt.Fprintln(cmd.ErrOrStderr(), idleLine(spec, i)) }
	}
	job, err := engine.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer job.Close()
	return job.Run(ctx)
}

// idleLine is the one line a run prints when it finds nothing to run:
// where the checkpoint stands and the watermark it holds.
func idleLine(spec query.Spec, i scheduler.Idle) string {
	at := "no batch has run yet"
	if i.LastCommitted >= 0 {
		at = fmt.Sprintf("batch %d is the last committed", i.LastCommitted)
	}
	what := "nothing new"
	if !spec.Trigger.AvailableNow && !spec.Trigger.Once {
		what = "waiting for new data"
	}
	return fmt.Sprintf("%s: no new data and no window for the watermark to close; %s, watermark %s",
		what, at, row.FormatTimestamp(i.WatermarkMs*1000))
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

// serveMetrics serves /metrics on addr (over TLS with src, mutual with a
// CA) and returns the progress observer.
func serveMetrics(addr string, src *tlsconf.Source, log *slog.Logger) (func(*scheduler.Progress), func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	ln, err := tlsconf.Listen(addr, src)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: tlsconf.HTTPErrorLog(log)}
	go srv.Serve(ln)
	return m.Observe, func() { srv.Close() }, nil
}
