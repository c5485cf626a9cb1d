package statestore

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/ids"
)

// ErrMemoryLimit is returned when the in-memory provider would hold more
// state than its process's MemoryLimit allows. The detail is a
// *MemoryLimitError.
var ErrMemoryLimit = errors.New("state memory limit exceeded")

// MemoryLimit is a budget of in-memory state shared by every Memory
// provider of a process (an executor, or `driver run`), so a process
// running several queries has one limit. Usage is the providers' estimate
// (keys, values, and the slots and entries of the tables holding them),
// not the Go heap: leave room
// for the rest of the process.
type MemoryLimit struct {
	limit int64
	used  atomic.Int64
}

// NewMemoryLimit returns a budget of bytes; zero or less means no limit
// (nil is also no limit).
func NewMemoryLimit(bytes int64) *MemoryLimit {
	if bytes <= 0 {
		return nil
	}
	return &MemoryLimit{limit: bytes}
}

// Limit is the budget in bytes (0: none).
func (l *MemoryLimit) Limit() int64 {
	if l == nil {
		return 0
	}
	return l.limit
}

// Used is the state the providers hold now, in bytes.
func (l *MemoryLimit) Used() int64 {
	if l == nil {
		return 0
	}
	return l.used.Load()
}

func (l *MemoryLimit) add(n int64) {
	if l != nil && n != 0 {
		l.used.Add(n)
	}
}

// check returns a *MemoryLimitError when holding extra more bytes would
// go past the limit.
func (l *MemoryLimit) check(p ids.PartitionID, extra int64) error {
	if l == nil {
		return nil
	}
	if used := l.used.Load() + extra; used > l.limit {
		return &MemoryLimitError{Partition: p, Used: used, Limit: l.limit}
	}
	return nil
}

// MemoryLimitError says which partition went past the limit and by how
// much. It matches ErrMemoryLimit.
type MemoryLimitError struct {
	Partition   ids.PartitionID
	Used, Limit int64
}

func (e *MemoryLimitError) Error() string {
	return fmt.Sprintf("state partition %d: the in-memory state store would hold %s, over this executor's state memory limit of %s (--state-memory-limit): "+
		"set stateStore: pebble in the query to keep state on local disk (stateStore is frozen in the checkpoint, so switching needs a new checkpointLocation), "+
		"or raise the limit, or spread the partitions over more executors", e.Partition, mib(e.Used), mib(e.Limit))
}

func (e *MemoryLimitError) Is(target error) bool { return target == ErrMemoryLimit }

// mib renders a byte count for a person: bytes, KiB, MiB or GiB.
func mib(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB (%d bytes)", float64(n)/(1<<30), n)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}
