package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/statestore"
)

func newCheckpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "Read a query's checkpoint"}
	var asJSON bool
	var s3 objstore.S3Options
	inspect := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show the last planned and committed batch, the next watermark, offsets and state size",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := inspectCheckpoint(cmd.Context(), args[0], objstore.Options{S3: s3})
			if err != nil {
				return err
			}
			return rep.write(cmd.OutOrStdout(), asJSON)
		},
	}
	inspect.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cliflags.S3(inspect.Flags(), &s3)
	cmd.AddCommand(inspect)
	return cmd
}

// inspectReport is the output of checkpoint inspect; its JSON field names
// are stable for scripts.
type inspectReport struct {
	QueryID              string            `json:"queryId"`
	Name                 string            `json:"name"`
	LastBatchID          int64             `json:"lastBatchId"`
	LastCommittedBatchID int64             `json:"lastCommittedBatchId"`
	NextBatchWatermark   string            `json:"nextBatchWatermark"`
	PendingRerun         bool              `json:"pendingRerun"`
	StateRows            int64             `json:"stateRows"`
	StateStore           string            `json:"stateStore"`
	ShufflePartitions    int               `json:"shufflePartitions"`
	Offsets              json.RawMessage   `json:"offsets"`
	Conf                 map[string]string `json:"conf,omitempty"`
}

func inspectCheckpoint(ctx context.Context, path string, opts objstore.Options) (*inspectReport, error) {
	store, err := objstore.Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	log := checkpoint.New(store)
	meta, err := log.ReadMetadata(ctx)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: no metadata: not a checkpoint, or empty", path)
	}
	if err != nil {
		return nil, err
	}
	last, commit, err := log.Latest(ctx)
	if err != nil {
		return nil, err
	}
	res, err := checkpoint.Decide(last, commit)
	if err != nil {
		return nil, err
	}
	rep := &inspectReport{QueryID: meta.QueryID, Name: meta.Name, LastBatchID: -1, LastCommittedBatchID: -1,
		StateStore: meta.StateStore, ShufflePartitions: meta.ShufflePartitions, Offsets: json.RawMessage("null")}
	wm := res.WatermarkMs
	if last != nil {
		rep.LastBatchID = last.BatchID
		rep.Conf = last.Conf
		if len(last.Sources) > 0 {
			rep.Offsets = last.Sources[0].End
		}
	}
	if res.Rerun != nil {
		rep.PendingRerun = true
		wm = res.Rerun.BatchWatermarkMs
	}
	if commit != nil {
		rep.LastCommittedBatchID = commit.BatchID
	}
	rep.NextBatchWatermark = row.FormatTimestamp(wm * 1000)
	// The pebble provider writes the memory provider's files, so one loader reads both.
	if commit != nil && (meta.StateStore == "memory" || meta.StateStore == "pebble") {
		prov := statestore.NewMemory(store, statestore.MemoryOptions{})
		for p := 0; p < meta.ShufflePartitions; p++ {
			st, err := prov.Open(ctx, p, statestore.Version(commit.BatchID+1))
			if err != nil {
				return nil, fmt.Errorf("read state partition %d: %w", p, err)
			}
			rep.StateRows += st.NumRows()
			st.Abort()
		}
	}
	return rep, nil
}

func (r *inspectReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "query              %s (%s)\n", r.Name, r.QueryID)
	fmt.Fprintf(w, "last batch         %d\n", r.LastBatchID)
	fmt.Fprintf(w, "last committed     %d\n", r.LastCommittedBatchID)
	if r.PendingRerun {
		fmt.Fprintf(w, "pending            batch %d is planned but not committed: the next start re-runs it as logged\n", r.LastBatchID)
	}
	fmt.Fprintf(w, "next watermark     %s\n", r.NextBatchWatermark)
	fmt.Fprintf(w, "state              %d rows in %d partitions (%s)\n", r.StateRows, r.ShufflePartitions, r.StateStore)
	fmt.Fprintf(w, "offsets            %s\n", r.Offsets)
	return nil
}

func newSinkCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sink", Short: "Read a sink's committed output"}
	var s3 objstore.S3Options
	cat := &cobra.Command{
		Use:   "cat PATH",
		Short: "Print the committed rows of a Parquet sink, following its log, as JSON lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := objstore.Open(ctx, args[0], objstore.Options{S3: s3})
			if err != nil {
				return err
			}
			cols, rows, err := parquet.ReadCommitted(ctx, store)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, r := range rows {
				obj := make(map[string]any, len(cols))
				for i, c := range cols {
					obj[c.Name] = jsonValue(r[i])
				}
				if err := enc.Encode(obj); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cliflags.S3(cat.Flags(), &s3)
	cmd.AddCommand(cat)
	return cmd
}

func jsonValue(v row.Value) any {
	switch v.Kind {
	case row.Null:
		return nil
	case row.String:
		return v.S
	case row.Long:
		return v.I
	case row.Double:
		return v.F
	case row.Bool:
		return v.I != 0
	case row.Timestamp:
		return row.FormatTimestamp(v.I)
	}
	return nil
}
