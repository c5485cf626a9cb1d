package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/sink/parquet"
)

// demoSpec is the course-activity tile on the built-in generator. Event
// time runs at 300x wall time, so a five-minute window closes about every
// seconds.
func demoSpec(dir string) query.Spec {
	f := false
	_ = f
	return query.Spec{
		Name: "course-activity-tile",
		Source: query.Source{Generator: &query.GeneratorSource{
			RowsPerSecond:     2000,
			Courses:           12,
			LateFraction:      0.002,
			Jitter:            query.Duration(30 * time.Second),
			Seed:              42,
			EventTimePerRow:   query.Duration(150 * time.Millisecond),
			MaxRowsPerTrigger: 50000,
		}},
		Watermark: &query.Watermark{Column: "event_time", Delay: query.Duration(10 * time.Minute)},
		Aggregate: &query.Aggregate{
			Window:   &query.Window{Column: "event_time", Size: query.Duration(5 * time.Minute)},
			GroupBy:  []string{"course_id"},
			Measures: []query.Measure{{Name: "event_count", Fn: query.FnCount}},
		},
		OutputMode:         query.Append,
		Sink:               query.Sink{Parquet: &query.ParquetSink{Path: filepath.Join(dir, "course_activity_tile"), PartitionBy: "window_date"}},
		CheckpointLocation: filepath.Join(dir, "checkpoint"),
		Trigger:            query.Trigger{ProcessingTime: query.Duration(time.Second)},
		ShufflePartitions:  4,
	}
}

func newDemoCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the five-minute course-activity tile on a built-in generator, printing windows as they close (Ctrl-C stops; run again to resume)",
		RunE: func(cmd *cobra.Command, args []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			spec := demoSpec(abs)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "demo: the course-activity tile (5-minute windows, 10-minute watermark, append) on a generator at 2000 events/s\n")
			fmt.Fprintf(out, "demo: checkpoint %s\ndemo: parquet    %s\ndemo: Ctrl-C stops; running again resumes from the checkpoint\n", spec.CheckpointLocation, spec.Sink.Parquet.Path)
			sinkStore, err := objstore.NewFS(spec.Sink.Parquet.Path)
			if err != nil {
				return err
			}
			printed := map[int64]bool{}
			return runSpec(cmd, spec, engine.Options{Progress: func(p *scheduler.Progress) {
				if p.Sink.NumOutputRows == 0 {
					return
				}
				printBatchWindows(cmd.Context(), out, sinkStore, p.ID, p.BatchID, printed)
			}})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "sluice-demo", "directory for the demo's checkpoint and Parquet output")
	return cmd
}

// printBatchWindows prints the windows batch id committed to the sink.
func printBatchWindows(ctx context.Context, out interface{ Write([]byte) (int, error) }, store objstore.Store, queryID string, id int64, printed map[int64]bool) {
	entries, err := parquet.LogEntries(ctx, store)
	if err != nil || printed[id] {
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
				var cells []string
				for i, c := range cols {
					cells = append(cells, c.Name+"="+fmtCell(r[i]))
				}
				fmt.Fprintln(out, "window closed: "+strings.Join(cells, " "))
			}
		}
	}
}

func fmtCell(v row.Value) string { return v.String() }
