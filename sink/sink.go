package sink

import (
	"context"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/row"
)

// Batch identifies the batch being written.
type Batch struct {
	QueryID string
	ID      ids.BatchID
}

// FileSink is written by reduce tasks, wherever they run, and committed by
// the driver.
//
// WritePartition stages the (batch, partition, rows) output: the files are
// invisible to a reader listing the sink path until Commit. Names and bytes
// are deterministic. It returns descriptors of the staged files (opaque
// strings the scheduler passes, unread, to Commit). Rows arrive sorted.
//
// Commit records the batch's files in the sink log (_sink_log/N) with
// create-if-absent and then makes them visible; an entry already written
// by the same query id for the same batch wins (a re-run: Commit(b, nil)
// finishes that logged commit), one from another writer is an error.
// Committed reports whether the log already holds the batch.
type FileSink interface {
	WritePartition(ctx context.Context, b Batch, partition ids.PartitionID, rows []row.Row) ([]string, error)
	Committed(ctx context.Context, batchID ids.BatchID) (bool, error)
	Commit(ctx context.Context, b Batch, files []string) error
}

// Gatherer is optional for a FileSink: it gathers small outputs into few
// files. A reduce task whose partition's rows are small (below the bound
// the driver sends, GatherBelow) returns them to the driver instead of
// staging its own files, and the driver stages every gathered partition's
// rows with WriteGathered before Commit: a batch that closes a few windows
// over many partitions stages one file per directory instead of one per
// partition. Large outputs stay where they are reduced (in distributed mode
// gathered rows cross gRPC).
//
// GatherBelow is the bound for a batch over partitions state partitions
// (0: never gather). Gather reports whether a partition's rows are below
// it. WriteGathered stages the parts (ascending by partition, each part's
// rows sorted) as FileSink.WritePartition stages one partition's: invisible
// until Commit, names and bytes a function of (batch, parts), so that a
// re-run that gathers the same parts writes the same objects.
type Gatherer interface {
	GatherBelow(partitions int) int64
	Gather(rows []row.Row, below int64) bool
	WriteGathered(ctx context.Context, b Batch, parts []PartitionRows) ([]string, error)
}

// PartitionRows are one state partition's output rows.
type PartitionRows struct {
	Partition ids.PartitionID
	Rows      []row.Row
}

// BatchWriter is foreachBatch: called on the driver with all of a batch's
// output rows. It may be called more than once for one batch id (a batch
// that failed after writing is re-run), so it is at-least-once unless the
// writer is idempotent on batchID.
type BatchWriter interface {
	WriteBatch(ctx context.Context, batchID ids.BatchID, rows []row.Row) error
}

// PartitionedBatchWriter is optional for a BatchWriter: it receives the rows
// split by state partition (parts[p] holds partition p's rows, sorted).
type PartitionedBatchWriter interface {
	WriteBatchParts(ctx context.Context, batchID ids.BatchID, parts [][]row.Row) error
}
