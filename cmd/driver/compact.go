package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

func newCompactCmd() *cobra.Command {
	var o parquet.CompactOptions
	var sinkPath, cpPath string
	var asJSON, takeOver bool
	var s3 objstore.S3Options
	cmd := &cobra.Command{
		Use:   "compact --sink PATH --checkpoint PATH [--before DATE]",
		Short: "Merge the small files of a Parquet sink's closed dates",
		Long: `Rewrites the many small files of each window_date= partition of a Parquet
sink whose windows can no longer change into a few large ones (at most
--max-rows-per-file rows each), while the query keeps running. A date is
closed when every window starting on it ends at or before the watermark the
query's checkpoint has committed (the one its next batch drops late rows
against); --checkpoint is required for that. --before limits it to earlier
dates.

Each date's swap is one replacement record in the sink log
(_sink_log/replace-<date>-<n>): readers that follow the log (driver sink
cat, a restarting driver) see the old files or the new ones, never both and
never neither. On a local filesystem the date's directory is exchanged
atomically (renameat2), so a reader that lists the directory does too. On
S3 the new files stay invisible (multipart uploads) until the record is
written, then appear, and the old files are deleted right after: a reader
that lists the bucket in between can see a window twice. Run one compact at
a time per sink: a run holds a lease (_sink_log/compact-lock) and another
refuses while it is younger than an hour. After a crash, run it again with
--take-over-lock: it finishes the interrupted swap first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sinkPath == "" {
				return errors.New("--sink is required: the Parquet sink path to compact")
			}
			if cpPath == "" {
				return errors.New("--checkpoint is required: only the query's committed watermark says which dates can no longer change")
			}
			if takeOver {
				o.LockTTL = time.Nanosecond
			}
			res, err := compactSink(cmd.Context(), sinkPath, cpPath, o, objstore.Options{S3: s3})
			if err != nil {
				return err
			}
			return writeCompact(cmd.OutOrStdout(), res, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sinkPath, "sink", "", "the Parquet sink path (local, file:// or s3://)")
	f.StringVar(&cpPath, "checkpoint", "", "the checkpoint of the query writing the sink: its committed watermark decides which dates are closed")
	f.StringVar(&o.Before, "before", "", "compact only dates before this one (YYYY-MM-DD)")
	f.IntVar(&o.MaxRowsPerFile, "max-rows-per-file", parquet.DefaultMaxRowsPerFile, "rows in one new file at most")
	f.BoolVar(&o.DryRun, "dry-run", false, "print what would be compacted and change nothing")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&takeOver, "take-over-lock", false, "take the sink's compaction lease even if another run holds it (that run is gone: it was killed)")
	cliflags.S3(f, &s3)
	return cmd
}

type compactReport struct {
	QueryID     string                  `json:"queryId"`
	WatermarkMs int64                   `json:"watermarkMs"`
	Watermark   string                  `json:"watermark"`
	DryRun      bool                    `json:"dryRun"`
	Dates       []parquet.CompactedDate `json:"dates"`
}

func compactSink(ctx context.Context, sinkPath, cpPath string, o parquet.CompactOptions, opts objstore.Options) (*compactReport, error) {
	cp, err := openExisting(ctx, cpPath, opts)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cpPath, err)
	}
	if !isCheckpoint(ctx, cp) {
		return nil, notFound{fmt.Errorf("checkpoint %s: no metadata file: not a checkpoint, or no query has started on it", cpPath)}
	}
	queryID, wm, err := checkpoint.ClosedWatermark(ctx, cp)
	if errors.Is(err, checkpoint.ErrNothingCommitted) {
		return nil, fmt.Errorf("checkpoint %s: no batch committed yet: no date is closed", cpPath)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cpPath, err)
	}
	sink, err := openExisting(ctx, sinkPath, opts)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sinkPath, err)
	}
	if !isSink(ctx, sink) {
		return nil, notFound{fmt.Errorf("sink %s: no %s directory: not a Parquet sink, or no batch has committed to it yet", sinkPath, parquet.LogDir)}
	}
	o.QueryID, o.Watermark = queryID, wm
	dates, err := parquet.CompactDates(ctx, sink, o)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sinkPath, err)
	}
	return &compactReport{QueryID: queryID, WatermarkMs: wm.Millis(), Watermark: row.FormatTimestamp(int64(wm)), DryRun: o.DryRun, Dates: dates}, nil
}

func writeCompact(w io.Writer, r *compactReport, asJSON bool) error {
	if asJSON {
		if r.Dates == nil {
			r.Dates = []parquet.CompactedDate{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	verb := "compacted"
	if r.DryRun {
		verb = "would compact"
	}
	fmt.Fprintf(w, "query %s, committed watermark %s\n", r.QueryID, r.Watermark)
	n := 0
	for _, d := range r.Dates {
		if d.Skipped != "" {
			fmt.Fprintf(w, "window_date=%s  %d files  left: %s\n", d.Date, d.FilesBefore, d.Skipped)
			continue
		}
		n++
		fmt.Fprintf(w, "window_date=%s  %d files -> %d  %d rows  %s\n", d.Date, d.FilesBefore, d.FilesAfter, d.Rows, verb)
	}
	fmt.Fprintf(w, "%d dates %s\n", n, verb)
	return nil
}
