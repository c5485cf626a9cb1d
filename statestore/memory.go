package statestore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// MemoryOptions configures the in-memory provider.
type MemoryOptions struct {
	// Operator is the stateful operator id (the <op> in file names).
	Operator int
	// SnapshotInterval: a snapshot is written when the committed version is
	// a multiple of it. Must be >= 1.
	SnapshotInterval int
	// Limit, when set, bounds the state held by every Memory provider
	// sharing it: a batch that would go past it fails with a
	// *MemoryLimitError that says to switch to stateStore pebble, instead
	// of the process being killed for running out of memory.
	Limit *MemoryLimit
	// BoundPrefix says that every key starts with its 8-byte event-time
	// bound (agg.Layout.BoundPrefix: windowed or time-bound groupings).
	// The provider then keeps a table per bound, so EvictBelow drops the
	// closed windows' tables instead of visiting the partition's rows.
	// Without it the rows are one table (and EvictBelow compares every
	// key); either way the state and its files are the same.
	BoundPrefix bool
}

// Memory keeps each partition's newest committed version in memory
// (memData: pointer-free tables, changed in place by the batch that has
// the partition open) and writes every version to the checkpoint as a
// delta (and periodically a snapshot). Opening the cached version is
// free; any other version, and the version an aborted batch changed, is
// rebuilt from the checkpoint's files.
type Memory struct {
	store objstore.Store
	recs  *records
	opts  MemoryOptions
	due   chan struct{} // MaintenanceDue
	mu    sync.Mutex
	parts map[ids.PartitionID]*memPart
}

// memPart is one cached partition. Its holder (the open store) reads data
// freely and changes it in place holding mu for writing, from its first
// change until it commits or aborts; Maintain reads data holding mu for
// reading, so a snapshot in the background copies a committed version
// (between batches: a batch's first change waits for the copy, which
// takes the rows' places, not their bytes). Whatever changes version,
// changed, attempt, lastDelta or lastSnap also holds mu for writing.
type memPart struct {
	mu sync.RWMutex
	// lastDelta is the newest version a delta made (the data has not
	// changed since), with its attempt; lastSnap the newest version of the
	// partition known to have a snapshot in the checkpoint (0: none).
	lastDelta   Version
	lastAttempt string
	lastSnap    Version
	version     Version
	// changed is whether version was made by a delta (this process's
	// commit wrote one, or the load applied one): checked against the
	// commit record before the cached version is reused.
	changed bool
	// attempt is the attempt whose delta made version (when changed).
	attempt string
	data    *memData
	// bytes is data's estimated memory as of the last commit or load
	// (read without mu by Held).
	bytes atomic.Int64
	open  bool
	// invalid is set (under mu) when an aborted batch left data
	// half-changed: the part is out of the cache and Maintain skips it.
	invalid bool

	// snapMu serializes maintenance of the partition; pending (under it)
	// is a version copied while it was the newest, waiting for its commit
	// record (see Memory.snapshot).
	snapMu  sync.Mutex
	pending *pendingSnap
}

// held is the part's estimated memory.
func (part *memPart) held() int64 {
	if part == nil {
		return 0
	}
	return part.bytes.Load()
}

// NewMemory returns an in-memory provider whose files go to store (rooted at
// the checkpoint).
func NewMemory(store objstore.Store, opts MemoryOptions) *Memory {
	if opts.SnapshotInterval < 1 {
		opts.SnapshotInterval = 10
	}
	return &Memory{store: store, recs: newRecords(store, opts.Operator), opts: opts, due: make(chan struct{}, 1), parts: map[ids.PartitionID]*memPart{}}
}

// Open returns partition p at version v.
func (m *Memory) Open(ctx context.Context, p ids.PartitionID, v Version) (Store, error) {
	m.mu.Lock()
	part := m.parts[p]
	if part != nil && part.open {
		m.mu.Unlock()
		return nil, fmt.Errorf("open state partition %d: already open", p)
	}
	cached := part != nil && part.version == v
	if cached {
		part.open = true
	}
	m.mu.Unlock()
	if cached {
		// The cached version is this process's own commit: reuse it only
		// if the committed attempt agrees (a version an abandoned attempt
		// made differs from the one the commit records: it changed a
		// partition the commit left unchanged, or the reverse, or both
		// changed it and the attempts differ).
		changed, attempt, known, err := m.recs.changedAt(ctx, p, v)
		if err != nil {
			m.mu.Lock()
			part.open = false
			m.mu.Unlock()
			return nil, fmt.Errorf("open state partition %d: %w", p, err)
		}
		if !known || changed == part.changed && (!changed || attempt == part.attempt) {
			kick(m.due) // version v is committed: a snapshot may be due
			return &memStore{m: m, p: p, part: part, opened: part.held()}, nil
		}
		m.mu.Lock()
		part.open = false
		m.mu.Unlock()
	}

	part, err := m.load(ctx, p, v)
	if err != nil {
		return nil, err
	}
	part.open = true
	m.mu.Lock()
	m.opts.Limit.add(part.held() - m.parts[p].held())
	m.parts[p] = part
	m.mu.Unlock()
	if err := m.opts.Limit.check(p, 0); err != nil {
		m.mu.Lock()
		if m.parts[p] == part {
			part.open = false
			m.opts.Limit.add(-part.held())
			delete(m.parts, p)
		}
		m.mu.Unlock()
		return nil, fmt.Errorf("open state partition %d version %d: %w", p, v, err)
	}
	kick(m.due)
	return &memStore{m: m, p: p, part: part, opened: part.held()}, nil
}

// load rebuilds version v of partition p from the checkpoint.
func (m *Memory) load(ctx context.Context, p ids.PartitionID, v Version) (*memPart, error) {
	part := &memPart{version: v, data: newMemData(m.opts.BoundPrefix)}
	part.bytes.Store(part.data.held())
	if v == 0 {
		return part, nil
	}
	prefix := partPrefix(m.opts.Operator, p)
	keys, err := m.store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("load state partition %d version %d: %w", p, v, err)
	}
	fs := parseFiles(keys, prefix)
	if err := m.recs.follow(ctx, fs, m.opts.Operator, p, v); err != nil {
		return nil, err
	}
	base, deltas := fs.plan(v)
	if err := fs.checkPlan(m.opts.Operator, p, base, v); err != nil {
		return nil, err
	}
	part.changed = len(deltas) > 0 && deltas[len(deltas)-1] == v || base == v
	if key, ok := fs.deltas[v]; ok && part.changed {
		part.attempt = attemptOf(key)
	} else if base == v {
		part.attempt = attemptOf(fs.snaps[base]) // named like its delta
	}
	part.lastSnap = base
	if len(deltas) > 0 {
		last := deltas[len(deltas)-1]
		part.lastDelta, part.lastAttempt = last, attemptOf(fs.deltas[last])
	}
	d := part.data
	var applied int
	read := func(key string, kind byte) error {
		rc, err := objstore.GetReader(ctx, m.store, key)
		if err != nil {
			return fmt.Errorf("load state partition %d: %w", p, err)
		}
		defer rc.Close()
		_, err = decodeStream(key, rc, kind, func(c change) error {
			switch {
			case c.below:
				if _, err := d.evictBelow(c.key, nil); err != nil {
					return err
				}
			case c.del:
				d.del(c.key)
			default:
				d.put(c.key, c.value)
			}
			// A partition too large for the limit is refused while it
			// loads, not after; the changes listed so far are let go.
			if applied++; applied%4096 == 0 {
				d.finish()
				return m.opts.Limit.check(p, d.held())
			}
			return nil
		})
		d.finish()
		return err
	}
	if base > 0 {
		if err := read(fs.snaps[base], kindSnap); err != nil {
			return nil, err
		}
	}
	for _, dv := range deltas {
		if err := read(fs.deltas[dv], kindDelta); err != nil {
			return nil, err
		}
	}
	part.bytes.Store(d.held())
	return part, nil
}

// Cleanup deletes files no version >= keep needs and returns how many.
func (m *Memory) Cleanup(ctx context.Context, p ids.PartitionID, keep Version) (int, error) {
	return cleanupPartition(ctx, m.store, m.recs, m.opts.Operator, p, keep)
}

// Release drops partition p's cached map unless it is open.
func (m *Memory) Release(p ids.PartitionID) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	part := m.parts[p]
	if part == nil || part.open {
		return false, nil
	}
	m.opts.Limit.add(-part.held())
	delete(m.parts, p)
	return true, nil
}

// Held returns each cached partition's estimated memory.
func (m *Memory) Held() map[ids.PartitionID]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[ids.PartitionID]int64, len(m.parts))
	for p, part := range m.parts {
		out[p] = part.held()
	}
	return out
}

// Close drops the cache.
func (m *Memory) Close() error {
	m.mu.Lock()
	for _, part := range m.parts {
		m.opts.Limit.add(-part.held())
	}
	m.parts = map[ids.PartitionID]*memPart{}
	m.mu.Unlock()
	return nil
}

// memStore is a partition at a version being changed by a batch, in place
// (memData).
type memStore struct {
	m    *Memory
	p    ids.PartitionID
	part *memPart
	// opened is the part's memory when the batch opened it; the limit is
	// checked against the growth since, every limitEvery changes.
	opened  int64
	changes int
	locked  bool
	done    bool
	err     error
}

// limitEvery is how many changes pass between checks of the memory limit
// (Commit checks too).
const limitEvery = 64

func (s *memStore) Version() Version { return s.part.version }

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	v, ok := s.part.data.get(key)
	return v, ok, nil
}

// change readies the part for a change: it takes the write lock at the
// batch's first change (Maintain may be copying the committed version)
// and checks the memory limit as the partition grows.
func (s *memStore) change() error {
	if s.done {
		return fmt.Errorf("change state partition %d: store already closed", s.p)
	}
	if s.err != nil {
		return s.err
	}
	if !s.locked {
		s.part.mu.Lock()
		s.locked = true
	}
	if s.changes++; s.changes%limitEvery == 0 {
		if err := s.m.opts.Limit.check(s.p, s.part.data.held()-s.opened); err != nil {
			s.err = err
			return err
		}
	}
	return nil
}

func (s *memStore) Put(key, value []byte) error {
	if len(key) > maxEntryBytes || len(value) > maxEntryBytes {
		return fmt.Errorf("write state partition %d: a key of %d bytes and a value of %d bytes, at most %d each", s.p, len(key), len(value), maxEntryBytes)
	}
	if err := s.change(); err != nil {
		return err
	}
	s.part.data.put(key, value)
	return nil
}

func (s *memStore) Delete(key []byte) error {
	if err := s.change(); err != nil {
		return err
	}
	s.part.data.del(key)
	return nil
}

// EvictBelow implements agg.RangeEvicter: every row whose key is below
// upper is removed (fn called for each first, if set). With BoundPrefix
// the closed bounds' tables are dropped whole; the delta records one
// range deletion instead of a deletion per row.
func (s *memStore) EvictBelow(upper []byte, fn func(key, value []byte) error) (int, error) {
	if err := s.change(); err != nil {
		return 0, err
	}
	return s.part.data.evictBelow(upper, fn)
}

func (s *memStore) Scan(fn func(key, value []byte) error) error {
	return s.part.data.scan(fn)
}

func (s *memStore) NumRows() int64 { return s.part.data.rows }

// MemoryBytes is the partition's tables (slots, entries, keys and values,
// the garbage a compaction has not reclaimed yet).
func (s *memStore) MemoryBytes() int64 { return s.part.data.held() }

// Commit writes version+1's delta; the changes are already in the cached
// tables, which it then tidies (memData.finish).
func (s *memStore) Commit(ctx context.Context, attempt string) (int, error) {
	if s.done {
		return 0, fmt.Errorf("commit state partition %d: store already closed", s.p)
	}
	if s.err != nil {
		s.Abort()
		return 0, fmt.Errorf("commit state partition %d: %w", s.p, s.err)
	}
	part, d := s.part, s.part.data
	if s.locked {
		if err := s.m.opts.Limit.check(s.p, d.held()-s.opened); err != nil {
			s.Abort()
			return 0, fmt.Errorf("commit state partition %d: %w", s.p, err)
		}
	}
	next := part.version + 1
	changes := d.delta()
	op := s.m.opts.Operator
	writes := 0
	if len(changes) > 0 {
		if err := s.m.store.Put(ctx, deltaKey(op, s.p, next, attempt), encodeFile(kindDelta, changes)); err != nil {
			s.Abort()
			return writes, fmt.Errorf("commit state partition %d version %d: %w", s.p, next, err)
		}
		writes++
	}
	if !s.locked {
		part.mu.Lock()
		s.locked = true
	}
	d.finish()
	if len(changes) == 0 {
		// Unchanged: no file; loading version next applies nothing for it.
		part.version, part.changed = next, false
	} else {
		// The snapshot is not written here: Maintain writes it in the
		// background once the version has committed.
		part.version, part.changed, part.attempt = next, true, attempt
		part.lastDelta, part.lastAttempt = next, attempt
	}
	before, after := part.held(), d.held()
	part.bytes.Store(after)
	s.m.opts.Limit.add(after - before)
	s.release()
	return writes, nil
}

func (s *memStore) release() {
	if s.done {
		return
	}
	s.done = true
	if s.locked {
		s.part.mu.Unlock()
		s.locked = false
	}
	s.m.mu.Lock()
	s.part.open = false
	s.m.mu.Unlock()
}

// Abort discards the changes. Unchanged, the cached version stays; a
// batch that changed it has changed it in place, so the partition leaves
// the cache and the next Open loads it from the checkpoint.
func (s *memStore) Abort() {
	if s.done {
		return
	}
	if s.locked {
		s.part.invalid = true
		s.m.mu.Lock()
		if s.m.parts[s.p] == s.part {
			delete(s.m.parts, s.p)
			s.m.opts.Limit.add(-s.part.held())
		}
		s.m.mu.Unlock()
	}
	s.release()
}
