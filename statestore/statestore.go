package statestore

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/ids"
)

// Version is a state version: the state after batch Version-1 committed.
// Version 0 is empty.
type Version int64

// ErrCorrupt is returned when a state file fails its checksum or a version
// cannot be rebuilt from the files present.
var ErrCorrupt = errors.New("state checkpoint corrupt")

// Provider opens state partitions at a version.
type Provider interface {
	// Open returns partition p at version v, to be changed by one batch and
	// committed as version v+1. Only one Store per partition may be open at
	// a time.
	Open(ctx context.Context, p ids.PartitionID, v Version) (Store, error)
	// Cleanup deletes the files of partition p that no version at or after
	// keep needs, and returns how many it deleted.
	Cleanup(ctx context.Context, p ids.PartitionID, keep Version) (deleted int, err error)
	Close() error
}

// Store is one partition at one version, being changed by a batch.
type Store interface {
	agg.State
	// EvictBelow (agg.RangeEvicter) removes the rows below a key; the
	// delta records one range deletion for them (file format 2).
	agg.RangeEvicter
	// Version is the version the store was opened at.
	Version() Version
	// NumRows is the number of rows after this batch's changes so far.
	NumRows() int64
	// MemoryBytes estimates the memory the partition's state uses.
	MemoryBytes() int64
	// Commit makes version Version()+1 durable in the checkpoint, in files
	// named by attempt (the batch attempt writing it, see AttemptID; ""
	// names files without an attempt, as format 1 did). It returns how
	// many objects it wrote.
	Commit(ctx context.Context, attempt string) (writes int, err error)
	// Abort discards the changes.
	Abort()
}

// Cache is implemented by providers that keep partitions on this process
// (in memory, in a local database). An executor whose partitions are
// reassigned to another executor releases them, so state that moved away
// stops holding memory and disk; the checkpoint is untouched and a later
// Open rebuilds the partition from it.
type Cache interface {
	// Release drops partition p's cached state. It does nothing and
	// returns false when p is not cached or is open.
	Release(p ids.PartitionID) (bool, error)
	// Held returns the partitions cached, with the bytes each is
	// estimated to hold (memory for Memory, the local database's size on
	// disk for Pebble).
	Held() map[ids.PartitionID]int64
}
