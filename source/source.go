// Package source defines how the driver plans offset ranges and how map
// tasks read them, and (kind.go) the seam every kind of source plugs into:
// its options' validation, its record metadata columns, its part of driver
// explain and how it is opened. Implementations live in sub-packages:
// file, generator, kafka; source/catalog lists them.
//
// Offsets are JSON documents owned by each source (Spark's
// {"topic":{"0":42}} for Kafka). They are written verbatim into offsets/N,
// so they must marshal canonically: the same position always gives the same
// bytes. The engine never interprets them; it only stores them, compares
// them with bytes.Equal, and hands them back.
package source

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrDataLoss matches errors for offsets a query needs that the source no
// longer has (retention, a recreated topic). Retrying cannot help: the
// query fails with the details, unless the source was told to skip.
var ErrDataLoss = errors.New("data loss: offsets the checkpoint needs are gone from the source")

// Offset is a source position, a canonical JSON document.
type Offset = json.RawMessage

// Split is one read task's share of a batch: a file list, a Kafka partition
// range, a row range. Desc is the source's own JSON description; it must be
// enough for Read in another process.
type Split struct {
	ID   string          `json:"id"`
	Desc json.RawMessage `json:"desc"`
}

// Record is one input record as Read hands it to its callback. Its slices
// and Meta are valid only during the callback.
type Record struct {
	// Value is the payload, one JSON document.
	Value []byte
	// Part names where the record came from (a file name, "topic-3"), and
	// Offset its position there (line number, Kafka offset), for bad-record
	// reports.
	Part   string
	Offset int64
	// Meta gives the record's metadata columns (Kind.MetaColumns), nil for
	// sources whose records have none.
	Meta Metadata
}

// Source plans offset ranges and reads them.
//
// Planning (Initial, Latest, Next, Splits) runs on the driver; Read runs in
// map tasks, possibly in another process that built its own Source from the
// same spec. A re-run of a batch calls Splits and Read with the offsets
// logged the first time, so Read of a given split must return the same
// records every time (or fail, e.g. with a data-loss error).
type Source interface {
	// Initial returns the start position of a query whose checkpoint has no
	// offsets (Kafka's startingOffsets).
	Initial(ctx context.Context) (Offset, error)
	// Latest returns the end of the data available at now, at or after
	// start. availableNow drains up to the Latest taken when it starts.
	Latest(ctx context.Context, start Offset, now time.Time) (Offset, error)
	// Next returns the end of the next batch from start: no further than
	// limit and within the source's per-trigger cap (maxOffsetsPerTrigger,
	// maxFilesPerTrigger). An end equal to start means no new data.
	Next(ctx context.Context, start, limit Offset) (Offset, error)
	// Splits divides the range [start, end) into read tasks. An empty range
	// has no splits.
	Splits(ctx context.Context, start, end Offset) ([]Split, error)
	// Read calls fn for every record of the split, in order. An error from
	// fn stops the read and is returned.
	Read(ctx context.Context, split Split, fn func(*Record) error) error
	// Close releases connections. It is idempotent.
	Close() error
}

// OffsetResolver is optional: a source whose Read gives the records of
// some splits an Offset that is not yet the position a bad-record report
// shows (the file source's byte-range splits give a line's byte offset:
// its line number needs the file before the range). ResolveOffsets turns
// Offsets Read gave records of split into those positions, in place; a map
// task calls it only for the records it sets aside.
type OffsetResolver interface {
	ResolveOffsets(ctx context.Context, split Split, offsets []int64) error
}

// Lag is optional: sources that can tell how far behind the end offset is.
type Lag interface {
	// Lag returns, per source partition and in total, latest minus end.
	Lag(ctx context.Context, end Offset) (perPartition map[string]int64, total int64, err error)
}

// Skipped is optional: sources that skip data (failOnDataLoss: false)
// report how many offsets a batch range skipped.
type Skipped interface {
	SkippedOffsets(start, end Offset) int64
}

// GroupCommitter is optional: a source that can publish a committed batch's
// end offsets to an external group (Kafka's commitOffsetsToGroup) for lag
// tools. It is display only: the engine never reads it back.
type GroupCommitter interface {
	CommitToGroup(ctx context.Context, end Offset) error
}

// Committer is optional for a Source: Commit is called on the driver after
// commits/N is written, with batch N's end offset (the file source's
// cleanSource). A failure is logged; the batch stays committed.
type Committer interface {
	Commit(ctx context.Context, end Offset) error
}
