package ids

import (
	"log/slog"
	"strconv"
)

// BatchID is a micro-batch's number in a checkpoint's logs
// (offsets/<BatchID>, commits/<BatchID>): 0 for a query's first batch, one
// more for each batch planned after it. -1 means "no batch" where a field
// needs one (a report of an empty checkpoint, a fault rule for any batch).
type BatchID int64

// String is the decimal number, as in offsets/N.
func (b BatchID) String() string { return strconv.FormatInt(int64(b), 10) }

// LogValue logs the id as the number it is.
func (b BatchID) LogValue() slog.Value { return slog.Int64Value(int64(b)) }

// PartitionID is a state/shuffle partition: 0..shufflePartitions-1, fixed
// for a checkpoint's life. A row's grouping key hashes to one partition;
// a partition's state, its reduce task and its sink files are keyed by it.
// Loop over a query's partitions with for p := range PartitionID(n).
type PartitionID int

// String is the decimal number, as in state/<op>/<partition>/.
func (p PartitionID) String() string { return strconv.Itoa(int(p)) }

// LogValue logs the id as the number it is.
func (p PartitionID) LogValue() slog.Value { return slog.IntValue(int(p)) }

// ParseBatchID reads a batch id as String writes it (strconv.ParseInt's
// syntax, base 10); callers that name log entries refuse negative ids.
func ParseBatchID(s string) (BatchID, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	return BatchID(n), err
}

// ExecutorID names a registered executor; the driver assigns it at
// registration, and it names the executor in task assignments, shuffle
// owners and errors that crossed the wire.
type ExecutorID string
