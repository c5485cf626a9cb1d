package statestore

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
}

// Memory keeps each partition's newest committed version in a map and
// writes every version to the checkpoint as a delta (and periodically a
// snapshot). Opening the cached version is free; any other version is
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
// freely; whatever changes data, bytes, version, changed, attempt, lastDelta
// or lastSnap holds mu for writing, and Maintain reads them holding it for
// reading, so a snapshot in the background copies a consistent version
// while a batch runs.
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
	data    map[string][]byte
	bytes   int64
	open    bool

	// snapMu serializes maintenance of the partition; pending (under it)
	// is a version copied while it was the newest, waiting for its commit
	// record (see Memory.snapshot).
	snapMu  sync.Mutex
	pending *pendingSnap
}

// mapEntryBytes estimates Go's map overhead per entry.
const mapEntryBytes = 48

// held is the part's estimated memory.
func (part *memPart) held() int64 {
	if part == nil {
		return 0
	}
	return part.bytes + int64(len(part.data))*mapEntryBytes
}

// NewMemory returns an in-memory provider whose files go to store (rooted at
// the checkpoint).
func NewMemory(store objstore.Store, opts MemoryOptions) *Memory {
	if opts.SnapshotInterval < 1 {
		opts.SnapshotInterval = 10
	}
	return &Memory{store: store, recs: newRecords(store), opts: opts, due: make(chan struct{}, 1), parts: map[ids.PartitionID]*memPart{}}
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
			return &memStore{m: m, p: p, part: part, overlay: map[string]*[]byte{}}, nil
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
	return &memStore{m: m, p: p, part: part, overlay: map[string]*[]byte{}}, nil
}

// load rebuilds version v of partition p from the checkpoint.
func (m *Memory) load(ctx context.Context, p ids.PartitionID, v Version) (*memPart, error) {
	part := &memPart{version: v, data: map[string][]byte{}}
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
	apply := func(c change) {
		k := string(c.key)
		if old, ok := part.data[k]; ok {
			part.bytes -= int64(len(k) + len(old))
		}
		if c.del {
			delete(part.data, k)
			return
		}
		val := append([]byte(nil), c.value...)
		part.data[k] = val
		part.bytes += int64(len(k) + len(val))
	}
	var applied int
	read := func(key string, kind byte) error {
		rc, err := objstore.GetReader(ctx, m.store, key)
		if err != nil {
			return fmt.Errorf("load state partition %d: %w", p, err)
		}
		defer rc.Close()
		_, err = decodeStream(key, rc, kind, func(c change) error {
			apply(c)
			// A partition too large for the limit is refused while it
			// loads, not after.
			if applied++; applied%4096 == 0 {
				return m.opts.Limit.check(p, part.held())
			}
			return nil
		})
		return err
	}
	if base > 0 {
		if err := read(fs.snaps[base], kindSnap); err != nil {
			return nil, err
		}
	}
	for _, d := range deltas {
		if err := read(fs.deltas[d], kindDelta); err != nil {
			return nil, err
		}
	}
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
		part.mu.RLock()
		out[p] = part.held()
		part.mu.RUnlock()
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

// memStore is a partition at a version plus this batch's changes; a nil
// *[]byte in the overlay marks a deletion.
type memStore struct {
	m       *Memory
	p       ids.PartitionID
	part    *memPart
	overlay map[string]*[]byte
	// added estimates the memory the overlay holds, checked against the
	// provider's limit as it grows.
	added int64
	done  bool
}

func (s *memStore) Version() Version { return s.part.version }

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	if v, ok := s.overlay[string(key)]; ok {
		if v == nil {
			return nil, false, nil
		}
		return *v, true, nil
	}
	v, ok := s.part.data[string(key)]
	return v, ok, nil
}

func (s *memStore) Put(key, value []byte) error {
	if _, ok := s.overlay[string(key)]; !ok {
		s.added += int64(len(key)+len(value)) + mapEntryBytes
		if err := s.m.opts.Limit.check(s.p, s.added); err != nil {
			return err
		}
	}
	v := append([]byte(nil), value...)
	s.overlay[string(key)] = &v
	return nil
}

func (s *memStore) Delete(key []byte) error {
	k := string(key)
	if _, inBase := s.part.data[k]; !inBase {
		delete(s.overlay, k)
		return nil
	}
	s.overlay[k] = nil
	return nil
}

func (s *memStore) Scan(fn func(key, value []byte) error) error {
	// Keys are valid only during fn (the State contract): one buffer
	// serves every row instead of an allocation per row, which a scan of a
	// large partition (every batch's eviction check) paid in the profile.
	var key []byte
	for k, v := range s.part.data {
		if len(s.overlay) > 0 {
			if _, changed := s.overlay[k]; changed {
				continue
			}
		}
		key = append(key[:0], k...)
		if err := fn(key, v); err != nil {
			return err
		}
	}
	for k, v := range s.overlay {
		if v == nil {
			continue
		}
		key = append(key[:0], k...)
		if err := fn(key, *v); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) NumRows() int64 {
	n := int64(len(s.part.data))
	for k, v := range s.overlay {
		_, inBase := s.part.data[k]
		switch {
		case v == nil && inBase:
			n--
		case v != nil && !inBase:
			n++
		}
	}
	return n
}

func (s *memStore) MemoryBytes() int64 {
	// Keys and values plus Go map overhead per entry, as the state will be
	// once this batch's changes (the overlay) commit.
	var base map[string][]byte
	var bytes int64
	if s.part != nil {
		base, bytes = s.part.data, s.part.bytes
	}
	rows := int64(len(base))
	for k, v := range s.overlay {
		if old, inBase := base[k]; inBase {
			bytes -= int64(len(k) + len(old))
			rows--
		}
		if v != nil {
			bytes += int64(len(k) + len(*v))
			rows++
		}
	}
	return bytes + rows*mapEntryBytes
}

// Commit writes version+1's delta (and snapshot when due), then applies
// the changes to the cached map.
func (s *memStore) Commit(ctx context.Context, attempt string) (int, error) {
	if s.done {
		return 0, fmt.Errorf("commit state partition %d: store already closed", s.p)
	}
	next := s.part.version + 1
	// Sorting the keys as strings and building the changes in that order
	// is cheaper than sorting the changes (encodeFile then finds them
	// sorted): a large partition's commit spent a quarter of its time in
	// that sort.
	keys := make([]string, 0, len(s.overlay))
	for k := range s.overlay {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	changes := make([]change, 0, len(s.overlay))
	for _, k := range keys {
		v := s.overlay[k]
		if v == nil {
			changes = append(changes, change{key: []byte(k), del: true})
		} else {
			changes = append(changes, change{key: []byte(k), value: *v})
		}
	}
	op := s.m.opts.Operator
	writes := 0
	if len(changes) == 0 {
		// Unchanged: no file; loading version next applies nothing for it.
		s.part.mu.Lock()
		s.part.version, s.part.changed = next, false
		s.part.mu.Unlock()
		s.release()
		return 0, nil
	}
	if err := s.m.store.Put(ctx, deltaKey(op, s.p, next, attempt), encodeFile(kindDelta, changes)); err != nil {
		s.Abort()
		return writes, fmt.Errorf("commit state partition %d version %d: %w", s.p, next, err)
	}
	writes++
	// Apply to the cached map. The snapshot is not written here: Maintain
	// writes it in the background once the version has committed.
	part := s.part
	part.mu.Lock()
	before := part.held()
	for k, v := range s.overlay {
		if old, ok := part.data[k]; ok {
			part.bytes -= int64(len(k) + len(old))
		}
		if v == nil {
			delete(part.data, k)
			continue
		}
		part.data[k] = *v
		part.bytes += int64(len(k) + len(*v))
	}
	part.version, part.changed, part.attempt = next, true, attempt
	part.lastDelta, part.lastAttempt = next, attempt
	after := part.held()
	part.mu.Unlock()
	s.m.opts.Limit.add(after - before)
	s.release()
	return writes, nil
}

func (s *memStore) release() {
	if s.done {
		return
	}
	s.done = true
	s.m.mu.Lock()
	s.part.open = false
	s.m.mu.Unlock()
}

// Abort discards the changes; the cached version is unchanged.
func (s *memStore) Abort() { s.release() }
