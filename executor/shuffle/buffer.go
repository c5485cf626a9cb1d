package shuffle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/ids"
)

// BatchKey names one batch of one driver run of a query.
type BatchKey struct {
	Query string
	// Run is the driver's run id; data of another run is never mixed in.
	Run   string
	Batch ids.BatchID
}

// Tag names one map task attempt's data.
type Tag struct {
	BatchKey
	Map     int
	Attempt uint64
}

// ErrReleased is returned for data of a batch released while it arrived.
var ErrReleased = errors.New("shuffle batch released")

// ErrFull is returned when the buffer is at its memory limit and has no
// spill directory.
var ErrFull = errors.New("shuffle buffer full")

// BufferOptions configure a Buffer.
type BufferOptions struct {
	// MemoryLimit bounds the bytes held in memory (default 256 MiB); data
	// beyond it goes to SpillDir.
	MemoryLimit int64
	// SpillDir receives spill files. Empty: writes beyond MemoryLimit fail
	// with ErrFull.
	SpillDir string
	Logger   *slog.Logger
}

// DefaultMemoryLimit is BufferOptions.MemoryLimit's default.
const DefaultMemoryLimit = 256 << 20

// Buffer holds the partials pushed to this executor until its reduce tasks
// take them. It is safe for concurrent use.
type Buffer struct {
	opts BufferOptions

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when data is stored
	batches map[BatchKey]*batchData
	mem     int64
	spilled int64
}

type batchData struct {
	// parts[p][m] is map task m's newest complete attempt for partition p.
	parts    map[ids.PartitionID]map[int]*stored
	spill    *os.File
	spillEnd int64
}

type stored struct {
	attempt uint64
	segs    []segment
	mem     int64
	bd      *batchData
}

// segment is a chunk in memory (data) or in the batch's spill file.
type segment struct {
	data   []byte
	off, n int64
}

// NewBuffer returns an empty buffer.
func NewBuffer(opts BufferOptions) *Buffer {
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = DefaultMemoryLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Buffer{opts: opts, changed: make(chan struct{}), batches: map[BatchKey]*batchData{}}
}

// Usage reports the bytes held in memory and the bytes spilled to disk
// (spilled bytes count until their batch is released).
func (b *Buffer) Usage() (memory, spilled int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem, b.spilled
}

// Writer receives one map task attempt's chunks for some partitions. A
// partition's data is stored only when Finish is called for it: until
// then it is invisible, and Abort discards it.
type Writer struct {
	b       *Buffer
	tag     Tag
	pending map[ids.PartitionID]*stored
}

// NewWriter starts receiving the data of tag.
func (b *Buffer) NewWriter(tag Tag) *Writer {
	return &Writer{b: b, tag: tag, pending: map[ids.PartitionID]*stored{}}
}

// Tag returns the writer's tag.
func (w *Writer) Tag() Tag { return w.tag }

// Append adds a chunk (copied) to partition p's pending data.
func (w *Writer) Append(p ids.PartitionID, chunk []byte) error {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	bd := b.batches[w.tag.BatchKey]
	if bd == nil {
		bd = &batchData{parts: map[ids.PartitionID]map[int]*stored{}}
		b.batches[w.tag.BatchKey] = bd
	}
	st := w.pending[p]
	switch {
	case st == nil:
		st = &stored{attempt: w.tag.Attempt, bd: bd}
		w.pending[p] = st
	case st.bd != bd:
		// The batch was released (and data of it arrived again) while this
		// attempt was sending: what it sent before is gone.
		return fmt.Errorf("store partials of batch %d partition %d: %w", w.tag.Batch, p, ErrReleased)
	}
	if len(chunk) == 0 {
		return nil
	}
	n := int64(len(chunk))
	if b.mem+n <= b.opts.MemoryLimit {
		st.segs = append(st.segs, segment{data: append([]byte(nil), chunk...), n: n})
		st.mem += n
		b.mem += n
		return nil
	}
	if b.opts.SpillDir == "" {
		return fmt.Errorf("store partials of batch %d partition %d: %w: %d bytes held, limit %d, and no spill directory",
			w.tag.Batch, p, ErrFull, b.mem, b.opts.MemoryLimit)
	}
	if bd.spill == nil {
		f, err := os.CreateTemp(b.opts.SpillDir, fmt.Sprintf("batch-%d-*.spill", w.tag.Batch))
		if err != nil {
			return fmt.Errorf("spill partials of batch %d: %w", w.tag.Batch, err)
		}
		bd.spill = f
		b.opts.Logger.Info("shuffle buffer over its memory limit: spilling to disk", "batch", w.tag.Batch, "limit", b.opts.MemoryLimit, "file", f.Name())
	}
	if _, err := bd.spill.WriteAt(chunk, bd.spillEnd); err != nil {
		return fmt.Errorf("spill partials of batch %d: %w", w.tag.Batch, err)
	}
	st.segs = append(st.segs, segment{off: bd.spillEnd, n: n})
	bd.spillEnd += n
	b.spilled += n
	return nil
}

// Finish stores partition p's pending data (possibly none) as map task
// tag.Map's data for p. It replaces a lower attempt's data; when a higher
// attempt is already stored, the pending data is dropped and stale is
// true.
func (w *Writer) Finish(p ids.PartitionID) (stale bool, err error) {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	bd := b.batches[w.tag.BatchKey]
	st := w.pending[p]
	delete(w.pending, p)
	if st == nil {
		if bd == nil {
			bd = &batchData{parts: map[ids.PartitionID]map[int]*stored{}}
			b.batches[w.tag.BatchKey] = bd
		}
		st = &stored{attempt: w.tag.Attempt, bd: bd}
	}
	if bd == nil || bd != st.bd {
		b.free(st)
		return false, fmt.Errorf("store partials of batch %d partition %d: %w", w.tag.Batch, p, ErrReleased)
	}
	maps := bd.parts[p]
	if maps == nil {
		maps = map[int]*stored{}
		bd.parts[p] = maps
	}
	if old := maps[w.tag.Map]; old != nil {
		if old.attempt > st.attempt {
			b.free(st)
			return true, nil
		}
		b.free(old)
	}
	maps[w.tag.Map] = st
	close(b.changed)
	b.changed = make(chan struct{})
	return false, nil
}

// Unfinished returns the partitions with data appended but not finished.
func (w *Writer) Unfinished() []ids.PartitionID {
	var ps []ids.PartitionID
	for p := range w.pending {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Abort discards every unfinished partition's data.
func (w *Writer) Abort() {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, st := range w.pending {
		b.free(st)
		delete(w.pending, p)
	}
}

// free forgets a stored entry's memory (its spilled bytes stay in the
// batch's file until the batch is released). Called with mu held.
func (b *Buffer) free(st *stored) {
	b.mem -= st.mem
	st.mem = 0
	st.segs = nil
}

// MissingError says which map tasks' data a reduce is still waiting for.
type MissingError struct {
	Batch     ids.BatchID
	Partition ids.PartitionID
	// Missing lists map indexes whose accepted attempt has not arrived.
	Missing []int
	Err     error
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("partials of batch %d partition %d: map tasks %v have not arrived: %v", e.Batch, e.Partition, e.Missing, e.Err)
}

func (e *MissingError) Unwrap() error { return e.Err }

// Wait returns partition p's data from every map task of key's batch, by
// map index, each as its chunks in order: attempts[m] is the attempt of map
// task m the driver accepted. It waits until all of them have arrived or
// ctx ends (then the error is a *MissingError). A stored attempt higher
// than the accepted one is an error: the driver accepts the newest attempt
// it launched.
func (b *Buffer) Wait(ctx context.Context, key BatchKey, p ids.PartitionID, attempts []uint64) ([][][]byte, error) {
	for {
		b.mu.Lock()
		var missing []int
		var found []*stored
		bd := b.batches[key]
		for m, want := range attempts {
			var st *stored
			if bd != nil {
				st = bd.parts[p][m]
			}
			switch {
			case st == nil || st.attempt < want:
				missing = append(missing, m)
			case st.attempt > want:
				b.mu.Unlock()
				return nil, fmt.Errorf("partials of batch %d partition %d: map task %d has attempt %d stored, newer than the accepted attempt %d", key.Batch, p, m, st.attempt, want)
			default:
				found = append(found, st)
			}
		}
		if len(missing) == 0 {
			out := make([][][]byte, len(found))
			var spill *os.File
			var reads []struct{ m, i int }
			for m, st := range found {
				out[m] = make([][]byte, len(st.segs))
				for i, s := range st.segs {
					if s.data != nil {
						out[m][i] = s.data
					} else if s.n > 0 {
						reads = append(reads, struct{ m, i int }{m, i})
						spill = bd.spill
					}
				}
			}
			b.mu.Unlock()
			for _, r := range reads {
				s := found[r.m].segs[r.i]
				buf := make([]byte, s.n)
				if _, err := spill.ReadAt(buf, s.off); err != nil && !(errors.Is(err, io.EOF) && int64(len(buf)) == s.n) {
					return nil, fmt.Errorf("read spilled partials of batch %d partition %d: %w", key.Batch, p, err)
				}
				out[r.m][r.i] = buf
			}
			return out, nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, &MissingError{Batch: key.Batch, Partition: p, Missing: missing, Err: ctx.Err()}
		case <-ch:
		}
	}
}

// Release drops a batch's data.
func (b *Buffer) Release(key BatchKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(key)
}

// ReleaseOlder drops query's data of other runs and of batches before
// batch.
func (b *Buffer) ReleaseOlder(query, run string, batch ids.BatchID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.batches {
		if k.Query == query && (k.Run != run || k.Batch < batch) {
			b.release(k)
		}
	}
}

// Close drops everything.
func (b *Buffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.batches {
		b.release(k)
	}
}

func (b *Buffer) release(key BatchKey) {
	bd := b.batches[key]
	if bd == nil {
		return
	}
	delete(b.batches, key)
	for _, maps := range bd.parts {
		for _, st := range maps {
			b.free(st)
		}
	}
	if bd.spill != nil {
		b.spilled -= bd.spillEnd
		name := bd.spill.Name()
		bd.spill.Close()
		if err := os.Remove(name); err != nil {
			b.opts.Logger.Warn("remove shuffle spill file", "file", name, "err", err)
		}
	}
}
