package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/cliflags"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

func newCheckpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "Read a query's checkpoint"}
	var asJSON bool
	var s3 objstore.S3Options
	inspect := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show where a checkpoint stands",
		Long: `Show the last planned and committed batch, whether an uncommitted batch will
be re-run, the watermark the next batch uses, the latest offsets and the
state rows. It refuses a path that is not a checkpoint and creates nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := inspectCheckpoint(cmd.Context(), args[0], objstore.Options{S3: s3})
			if err != nil {
				return err
			}
			return rep.Write(cmd.OutOrStdout(), asJSON)
		},
	}
	inspect.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cliflags.S3(inspect.Flags(), &s3)
	cmd.AddCommand(inspect)
	return cmd
}

// inspectCheckpoint opens path and inspects it (checkpoint.Inspect). A path
// that is not a checkpoint is errNotFound, with a hint when it is a sink.
func inspectCheckpoint(ctx context.Context, path string, opts objstore.Options) (*checkpoint.Report, error) {
	store, err := openExisting(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	rep, err := checkpoint.Inspect(ctx, store)
	if errors.Is(err, checkpoint.ErrNoMetadata) {
		hint := ""
		if isSink(ctx, store) {
			hint = " (it is a Parquet sink: read it with driver sink cat)"
		}
		return nil, notFound{fmt.Errorf("checkpoint %s: %w%s", path, err, hint)}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return rep, nil
}

func newSinkCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sink", Short: "Read a sink's committed output"}
	var s3 objstore.S3Options
	cat := &cobra.Command{
		Use:   "cat PATH",
		Short: "Print a Parquet sink's committed rows as JSON lines",
		Long:  `Print the committed rows of a Parquet sink, following its sink log (files of uncommitted batches are not read), as JSON lines.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sinkCat(cmd.Context(), args[0], objstore.Options{S3: s3}, cmd.OutOrStdout())
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

// errNotFound marks a path that is not what the command reads (no such
// directory, not a sink, not a checkpoint).
var errNotFound = errors.New("not found")

// notFound is an error matching errNotFound whose text is its own.
type notFound struct{ error }

func (notFound) Is(target error) bool { return target == errNotFound }

// openExisting opens a store for reading without creating anything: a
// local path must be an existing directory (objstore.Open would create it,
// so a typo would look like an empty sink).
func openExisting(ctx context.Context, path string, opts objstore.Options) (objstore.Store, error) {
	u, err := objstore.ParseURI(path)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "file" {
		fi, err := os.Stat(u.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, notFound{errors.New("no such directory")}
		case err != nil:
			return nil, err
		case !fi.IsDir():
			return nil, notFound{errors.New("not a directory")}
		}
	}
	return objstore.Open(ctx, path, opts)
}

// isSink reports whether store holds a Parquet sink log.
func isSink(ctx context.Context, store objstore.Store) bool {
	keys, err := store.List(ctx, parquet.LogDir)
	return err == nil && len(keys) > 0
}

// isCheckpoint reports whether store holds a checkpoint's metadata.
func isCheckpoint(ctx context.Context, store objstore.Store) bool {
	_, err := checkpoint.New(store).ReadMetadata(ctx)
	return err == nil
}

// sinkCat prints the committed rows of the Parquet sink at path as JSON
// lines, window_start and window_end first, then the other columns in the
// files' order.
func sinkCat(ctx context.Context, path string, opts objstore.Options, w io.Writer) error {
	store, err := openExisting(ctx, path, opts)
	if err != nil {
		return fmt.Errorf("sink %s: %w", path, err)
	}
	if !isSink(ctx, store) {
		hint := ""
		if isCheckpoint(ctx, store) {
			hint = " (it is a checkpoint: read it with driver checkpoint inspect)"
		}
		return notFound{fmt.Errorf("sink %s: no %s directory: not a Parquet sink, or no batch has committed to it yet%s", path, parquet.LogDir, hint)}
	}
	// One file's rows at a time: the output may be larger than memory.
	bw := bufio.NewWriter(w)
	var order []int
	err = parquet.EachCommitted(ctx, store, func(cols []query.Column, rows []row.Row) error {
		if order == nil {
			order = columnOrder(cols)
		}
		for _, r := range rows {
			bw.WriteByte('{')
			for n, i := range order {
				if n > 0 {
					bw.WriteByte(',')
				}
				k, _ := json.Marshal(cols[i].Name)
				v, err := json.Marshal(jsonValue(r[i]))
				if err != nil {
					return err
				}
				bw.Write(k)
				bw.WriteByte(':')
				bw.Write(v)
			}
			bw.WriteString("}\n")
		}
		return nil
	})
	if err != nil {
		bw.Flush()
		return fmt.Errorf("sink %s: %w", path, err)
	}
	return bw.Flush()
}

// columnOrder puts window_start and window_end first (a window reads
// start to end), the rest in the given order.
func columnOrder(cols []query.Column) []int {
	var first, rest []int
	for _, name := range []string{query.WindowStart, query.WindowEnd} {
		for i, c := range cols {
			if c.Name == name {
				first = append(first, i)
			}
		}
	}
	for i, c := range cols {
		if c.Name != query.WindowStart && c.Name != query.WindowEnd {
			rest = append(rest, i)
		}
	}
	return append(first, rest...)
}
