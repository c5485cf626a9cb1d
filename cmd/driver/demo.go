package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/driver/demo"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/source/generator"
)

// defaultDemoHTTP is the demo's HTTP port: a free port on loopback, its
// URL printed in the banner.
const defaultDemoHTTP = "127.0.0.1:0"

func newDemoCmd() *cobra.Command {
	var dir, httpAddr string
	var inProcess bool
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR] [--http-addr ADDR] [--in-process]",
		Short: "Run the course-activity tile end to end, no set-up needed",
		Long: `demo runs the five-minute course-activity tile on the whole architecture
in this process: an embedded Kafka-protocol broker fed by the event
generator, the driver service and two executors talking gRPC on loopback, a
local checkpoint and Parquet output in --dir. Windows are printed as they
close; Ctrl-C stops, and running it again resumes from the checkpoint.

It serves what a production driver serves on its HTTP port, on loopback:
the status page at the URL the banner prints, /metrics for Prometheus,
/healthz and /readyz (--http-addr chooses the address).

--in-process runs the query on the generator source with in-process tasks instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// The status page and /metrics, as driver serve has them.
			tr := monitor.New(monitor.Options{})
			ready := func() error {
				for _, v := range tr.List() {
					if v.State == monitor.Running {
						return nil
					}
				}
				return errors.New("the demo's query is not running yet")
			}
			var page string
			stopHTTP, err := serveHTTPWith(cmd.Context(), httpConfig{Addr: httpAddr, OnListen: func(a string) { page = "http://" + a + "/" }}, tr, ready, logger(cmd))
			if err != nil {
				return fmt.Errorf("--http-addr: %w", err)
			}
			defer stopHTTP()
			sinkStore, err := objstore.NewFS(filepath.Join(abs, "course_activity_tile"))
			if err != nil {
				return err
			}
			printed := map[ids.BatchID]bool{}
			windows := progress.Committed(func(p *progress.Report) {
				if p.Sink.NumOutputRows > 0 {
					printBatchWindows(cmd.Context(), out, sinkStore, p.ID, p.BatchID, printed)
				}
			})
			if inProcess {
				gen := demo.Events()
				spec := demo.Spec(abs, query.Source{Generator: &gen})
				announce(out, spec, "a generator at 2000 events/s, tasks in this process", page)
				return runSpecTracked(cmd, spec, microbatch.Options{Observer: windows}, tr)
			}
			return demo.Run(cmd.Context(), demo.Options{
				Dir: abs, Logger: logger(cmd), Stdout: out, Tracker: tr,
				Announce: func(spec query.Spec, broker string) {
					announce(out, spec, fmt.Sprintf("an embedded broker (%s, topic %s) fed at 2000 events/s, a driver and 2 executors over gRPC", broker, demo.Topic), page)
				},
				Observer: progress.Observers{monitor.LinePrinter(cmd.ErrOrStderr()), windows},
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "sluice-demo", "directory for the demo's broker data, checkpoint and Parquet output")
	cmd.Flags().StringVar(&httpAddr, "http-addr", defaultDemoHTTP, "serve the status page, /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:8080 (port 0: a free port; the banner prints the URL)")
	cmd.Flags().BoolVar(&inProcess, "in-process", false, "run on the generator source with in-process tasks (no broker, no executors)")
	return cmd
}

func announce(out io.Writer, spec query.Spec, how, page string) {
	fmt.Fprintf(out, "demo: the course-activity tile (5-minute windows, 10-minute watermark, append) on %s\n", how)
	fmt.Fprintf(out, "demo: status page %s (Prometheus metrics at %smetrics)\n", page, page)
	fmt.Fprintf(out, "demo: checkpoint %s\ndemo: parquet    %s\ndemo: Ctrl-C stops; running again resumes from the checkpoint\n", spec.CheckpointLocation, spec.Sink.Parquet.Path)
	fmt.Fprintf(out, "demo: %s\n", demoLateNote(spec))
}

// demoLateNote explains the first windows the demo prints: they are old,
// because batch 0 runs with no watermark and so accepts the generator's
// late rows (Spark's rule: the watermark takes effect from the next batch).
func demoLateNote(spec query.Spec) string {
	late := "late rows"
	if g := spec.Source.Generator; g != nil && g.LateFraction > 0 {
		late = fmt.Sprintf("late rows (%.1f%% of events, %s older than the rest)", g.LateFraction*100, generator.LateDelay)
	} else if spec.Source.Kafka != nil {
		d := demo.Events()
		late = fmt.Sprintf("late rows (%.1f%% of events, %s older than the rest)", d.LateFraction*100, generator.LateDelay)
	}
	return fmt.Sprintf("the first windows printed are about %s older than the ones after them: the generator also sends %s, and batch 0 has no watermark yet, "+
		"so it accepts them (as Spark does) and their windows close at once; from batch 1 on such rows are dropped as late", generator.LateDelay, late)
}

// printBatchWindows prints the windows batch id committed to the sink.
func printBatchWindows(ctx context.Context, out io.Writer, store objstore.Store, queryID string, id ids.BatchID, printed map[ids.BatchID]bool) {
	if printed[id] {
		return
	}
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil {
		return
	}
	printed[id] = true
	for _, e := range entries {
		if e.BatchID != id || e.QueryID != queryID {
			continue
		}
		for _, f := range e.Files {
			data, err := store.Get(ctx, f)
			if err != nil {
				continue
			}
			cols, rows, err := parquet.ReadFile(data)
			if err != nil {
				continue
			}
			for _, r := range rows {
				cells := make([]string, 0, len(cols))
				for i, c := range cols {
					cells = append(cells, c.Name+"="+r[i].String())
				}
				fmt.Fprintln(out, "window closed: "+strings.Join(cells, " "))
			}
		}
	}
}
