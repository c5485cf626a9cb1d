package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/fault"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
)

func newRunCmd() *cobra.Command {
	var file, progressJSON, cpuProfile string
	var hc httpConfig
	var tlsFlags tlsconf.Config
	var guards cliflags.Guards
	var sourceRetry time.Duration
	var stateMemoryLimit int64
	var s3 objstore.S3Options
	cmd := &cobra.Command{
		Use:   "run -f QUERY.yaml",
		Short: "Run one query in this process",
		Long: `Run one query in this process until its trigger stops (availableNow and
once exit 0 when done) or SIGINT/SIGTERM (a batch in flight is abandoned,
never half-committed, and re-run as logged on the next start).`,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if file == "" {
				return fmt.Errorf("run: -f QUERY.yaml is required")
			}
			stopProfile, err := cliflags.StartCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, stopProfile()) }()
			spec, err := query.Load(file)
			if err != nil {
				return err
			}
			// Everything that can be checked is checked before any file
			// (progress, checkpoint, sink) is created.
			if err := microbatch.Check(spec); err != nil {
				return err
			}
			// The HTTP port binds before the progress file is created: a busy
			// port creates nothing.
			var tr *monitor.Tracker
			if hc.Addr != "" || hc.HealthAddr != "" {
				src, err := tlsconf.Open(tlsFlags)
				if err != nil {
					return err
				}
				hc.TLS = src
				tr = monitor.New(monitor.Options{Health: hc.Health})
				ready := func() error {
					if v, ok := tr.Get(spec.Name); ok && v.State == monitor.Running {
						return nil
					}
					return fmt.Errorf("query %s is not running yet", spec.Name)
				}
				stop, err := serveHTTPWith(cmd.Context(), hc, tr, ready, logger(cmd))
				if err != nil {
					return err
				}
				defer stop()
			}
			progressLog, closeProgress, err := monitor.OpenJSONLog(progressJSON)
			if err != nil {
				return err
			}
			defer closeProgress()
			opts := microbatch.Options{
				StateMemoryLimit: statestore.NewMemoryLimit(stateMemoryLimit),
				Store:            objstore.Options{S3: s3},
				AllowFirstStart:  guards.AllowFirstStart(),
				SourceRetryFor:   sourceRetry,
				AllowReplay:      guards.AllowReplay(),
				Ticket:           guards.Ticket(),
				ApprovedBy:       guards.By(who),
				Observer:         progressLog,
			}
			if tr != nil {
				opts.WrapStore = countStores(tr)
			}
			return runSpecTracked(cmd, spec, opts, tr)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "query spec (YAML or JSON)")
	cmd.Flags().StringVar(&progressJSON, "progress-json", "", "append one JSON progress object per batch to this file")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run, from reading the spec to exit, to this file (go tool pprof FILE)")
	addHTTPFlags(cmd.Flags(), &hc, "")
	cliflags.ProductionGuards(cmd.Flags(), &guards)
	cmd.Flags().DurationVar(&sourceRetry, "source-retry-for", 5*time.Minute, "keep retrying this long when the source is unreachable (a broker down) before failing, e.g. 5m or 30s")
	cliflags.Bytes(cmd.Flags(), &stateMemoryLimit, "state-memory-limit", 0, "state the in-memory state store (stateStore: memory) may hold, e.g. 512MiB or 2GiB; past it a batch fails with advice to switch to stateStore: pebble (0: no limit)")
	cliflags.S3(cmd.Flags(), &s3)
	tlsFlags.RegisterCerts(cmd.Flags())
	return cmd
}

// runSpec builds and runs a query, printing one line per batch on stderr.
func runSpec(cmd *cobra.Command, spec query.Spec, opts microbatch.Options) error {
	return runSpecTracked(cmd, spec, opts, nil)
}

// runSpecTracked is runSpec that also records the query's states and
// progress in tr (if not nil), for the HTTP port.
func runSpecTracked(cmd *cobra.Command, spec query.Spec, opts microbatch.Options, tr *monitor.Tracker) error {
	ctx := cmd.Context()
	hook, err := fault.FromEnv()
	if err != nil {
		return err
	}
	opts.Hook = hook
	opts.Logger = logger(cmd)
	opts.Stdout = cmd.OutOrStdout()
	printLine := monitor.LinePrinter(cmd.ErrOrStderr())
	if spec.Trigger.AvailableNow && isTerminal(cmd.ErrOrStderr()) {
		// On a terminal an availableNow run shows how far it is: offsets
		// done of offsets to do, rows/s and the time left.
		bp := &barPrinter{w: cmd.ErrOrStderr(), now: time.Now}
		printLine = progress.Committed(bp.print)
		defer bp.finish()
	}
	idle := progress.Funcs{OnIdle: func(i progress.Idle) { fmt.Fprintln(cmd.ErrOrStderr(), idleLine(spec, i)) }}
	obs := progress.Observers{printLine, idle, opts.Observer}
	ref := monitor.Ref{Name: spec.Name}
	if tr != nil {
		tr.SetDesired(ref, monitor.DesiredRunning, 0)
		tr.SetState(ref, monitor.Starting, nil)
		// The health verdict compares batches with the trigger, and sees a
		// batch in flight and retries.
		tr.SetTrigger(ref, time.Duration(spec.Trigger.ProcessingTime))
		obs = append(obs, tr.Observer(ref))
	}
	opts.Observer = obs
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		if tr != nil {
			tr.SetState(ref, monitor.Failed, err)
		}
		return err
	}
	defer job.Close()
	ref.ID = job.Query.QueryID()
	if tr != nil {
		tr.SetState(ref, monitor.Running, nil)
	}
	err = job.Run(ctx, nil)
	if tr != nil {
		tr.SetState(ref, endState(ctx, err), err)
	}
	return err
}

// endState is the observed state of a query whose run returned err.
func endState(ctx context.Context, err error) monitor.State {
	switch {
	case err != nil:
		return monitor.Failed
	case ctx.Err() != nil:
		return monitor.Stopped
	default:
		return monitor.Finished
	}
}

// idleLine is the one line a run prints when it finds nothing to run:
// where the checkpoint stands and the watermark it holds.
func idleLine(spec query.Spec, i progress.Idle) string {
	at := "no batch has run yet"
	if i.LastCommitted >= 0 {
		at = fmt.Sprintf("batch %d is the last committed", i.LastCommitted)
	}
	what := "nothing new"
	if !spec.Trigger.AvailableNow && !spec.Trigger.Once {
		what = "waiting for new data"
	}
	return fmt.Sprintf("%s: no new data and no window for the watermark to close; %s, watermark %s",
		what, at, row.FormatTimestamp(int64(i.Watermark)))
}
