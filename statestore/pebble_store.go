package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicehq/sluice/ids"
)

// pebEntry is a key this batch has read or changed. A clean entry caches
// a read; a dirty one is a put (del false) or a deletion of a key that
// exists in the base version.
type pebEntry struct {
	val    []byte
	dirty  bool
	del    bool
	inBase bool
}

// pebStore is a partition at a version plus this batch's changes, which
// stay in memory until Commit.
type pebStore struct {
	pb      *Pebble
	p       ids.PartitionID
	part    *pebPart
	version Version
	rows    int64
	overlay map[string]*pebEntry
	bytes   int64 // overlay's estimated size
	kbuf    []byte
	done    bool
	// upper is the largest bound given to EvictBelow this batch: rows of
	// the database below it are gone from this batch's view (the commit
	// deletes the range). evictedBase is whether the database had any.
	upper       []byte
	evictedBase bool
}

// overlayEntryBytes estimates the Go overhead of one overlay entry.
const overlayEntryBytes = 96

func newPebStore(pb *Pebble, p ids.PartitionID, part *pebPart) *pebStore {
	return &pebStore{pb: pb, p: p, part: part, version: part.m.version, rows: part.m.rows, overlay: map[string]*pebEntry{}}
}

func (s *pebStore) Version() Version { return s.version }

// dbKey returns key behind the data prefix, in a buffer reused by the
// next call.
func (s *pebStore) dbKey(key []byte) []byte {
	s.kbuf = append(append(s.kbuf[:0], dataPrefix), key...)
	return s.kbuf
}

func (s *pebStore) check(op string) error {
	if s.done {
		return fmt.Errorf("%s state partition %d: store already closed", op, s.p)
	}
	if s.part.db == nil {
		return fmt.Errorf("%s state partition %d: provider closed", op, s.p)
	}
	return nil
}

// lookup returns the entry for key, reading the base version into a clean
// entry the first time.
func (s *pebStore) lookup(key []byte) (*pebEntry, error) {
	if e, ok := s.overlay[string(key)]; ok {
		return e, nil
	}
	if err := s.check("read"); err != nil {
		return nil, err
	}
	e := &pebEntry{}
	if s.evicted(key) {
		// Evicted by EvictBelow: the base row, if any, is gone.
		s.overlay[string(key)] = e
		s.bytes += int64(len(key)) + overlayEntryBytes
		return e, nil
	}
	val, closer, err := s.part.db.Get(s.dbKey(key))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("read state partition %d: %w", s.p, err)
	default:
		e.val = append([]byte(nil), val...)
		e.inBase = true
		closer.Close()
	}
	s.overlay[string(key)] = e
	s.bytes += int64(len(key)+len(e.val)) + overlayEntryBytes
	return e, nil
}

func (s *pebStore) Get(key []byte) ([]byte, bool, error) {
	e, err := s.lookup(key)
	if err != nil {
		return nil, false, err
	}
	if e.del || (!e.dirty && !e.inBase) {
		return nil, false, nil
	}
	return e.val, true, nil
}

// live reports whether the entry's key exists in this batch's view.
func (e *pebEntry) live() bool {
	if e.dirty {
		return !e.del
	}
	return e.inBase
}

func (s *pebStore) Put(key, value []byte) error {
	e, err := s.lookup(key)
	if err != nil {
		return err
	}
	if !e.live() {
		s.rows++
	}
	s.bytes += int64(len(value) - len(e.val))
	e.val = append(e.val[:0:0], value...)
	e.dirty, e.del = true, false
	return nil
}

func (s *pebStore) Delete(key []byte) error {
	e, err := s.lookup(key)
	if err != nil {
		return err
	}
	if e.live() {
		s.rows--
	}
	s.bytes -= int64(len(e.val))
	e.val = nil
	if e.inBase {
		e.dirty, e.del = true, true
	} else {
		// Like Memory: deleting a key the base does not have records
		// nothing, so both providers write the same delta.
		e.dirty, e.del = false, false
	}
	return nil
}

// evicted reports whether key is below the batch's EvictBelow bound.
func (s *pebStore) evicted(key []byte) bool {
	return s.upper != nil && bytes.Compare(key, s.upper) < 0
}

// EvictBelow implements agg.RangeEvicter: the rows below upper are visited
// with one bounded iterator (the database's, merged with this batch's
// changes), never the whole partition, and the commit deletes them with
// one range deletion, in the database and in the delta.
func (s *pebStore) EvictBelow(upper []byte, fn func(key, value []byte) error) (int, error) {
	if err := s.check("evict"); err != nil {
		return 0, err
	}
	var changed []string
	for k := range s.overlay {
		if k < string(upper) {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	removed := 0
	visit := func(key, value []byte) error {
		removed++
		if fn != nil {
			return fn(key, value)
		}
		return nil
	}
	visitChange := func(k string) error {
		if e := s.overlay[k]; e.live() {
			return visit([]byte(k), e.val)
		}
		return nil
	}
	ub := append([]byte{dataPrefix}, upper...)
	it, err := s.part.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataPrefix}, UpperBound: ub})
	if err != nil {
		return 0, fmt.Errorf("evict state partition %d: %w", s.p, err)
	}
	j := 0
	for ok := it.First(); ok; ok = it.Next() {
		s.evictedBase = true
		key := it.Key()[1:]
		for j < len(changed) && changed[j] < string(key) {
			if err := visitChange(changed[j]); err != nil {
				it.Close()
				return removed, err
			}
			j++
		}
		if j < len(changed) && changed[j] == string(key) {
			if err := visitChange(changed[j]); err != nil {
				it.Close()
				return removed, err
			}
			j++
			continue
		}
		if s.evicted(key) {
			continue // gone at an earlier call
		}
		val, err := it.ValueAndErr()
		if err == nil {
			err = visit(key, val)
		}
		if err != nil {
			it.Close()
			return removed, err
		}
	}
	if err := it.Close(); err != nil {
		return removed, fmt.Errorf("evict state partition %d: %w", s.p, err)
	}
	for ; j < len(changed); j++ {
		if err := visitChange(changed[j]); err != nil {
			return removed, err
		}
	}
	// What was below upper is gone: a key there is as one the base
	// version never had (the range deletion covers the base's rows).
	for _, k := range changed {
		e := s.overlay[k]
		s.bytes -= int64(len(e.val))
		*e = pebEntry{}
	}
	s.rows -= int64(removed)
	if s.upper == nil || bytes.Compare(upper, s.upper) > 0 {
		s.upper = append(s.upper[:0], upper...)
	}
	return removed, nil
}

// Scan calls fn for every row in key order: the base version's rows merged
// with this batch's changes.
func (s *pebStore) Scan(fn func(key, value []byte) error) error {
	if err := s.check("scan"); err != nil {
		return err
	}
	var changed []string
	for k, e := range s.overlay {
		if e.dirty {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	it, err := s.part.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataPrefix}, UpperBound: []byte{dataEnd}})
	if err != nil {
		return fmt.Errorf("scan state partition %d: %w", s.p, err)
	}
	emitChange := func(k string) error {
		if e := s.overlay[k]; !e.del {
			return fn([]byte(k), e.val)
		}
		return nil
	}
	j := 0
	for ok := it.First(); ok; ok = it.Next() {
		key := it.Key()[1:]
		for j < len(changed) && bytes.Compare([]byte(changed[j]), key) < 0 {
			if err := emitChange(changed[j]); err != nil {
				it.Close()
				return err
			}
			j++
		}
		if j < len(changed) && changed[j] == string(key) {
			if err := emitChange(changed[j]); err != nil {
				it.Close()
				return err
			}
			j++
			continue
		}
		if s.evicted(key) {
			continue
		}
		val, err := it.ValueAndErr()
		if err == nil {
			err = fn(key, val)
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan state partition %d: %w", s.p, err)
	}
	for ; j < len(changed); j++ {
		if err := emitChange(changed[j]); err != nil {
			return err
		}
	}
	return nil
}

func (s *pebStore) NumRows() int64 { return s.rows }

// MemoryBytes is the partition's memtable, its share of the block cache
// shared by all partitions, and this batch's overlay.
func (s *pebStore) MemoryBytes() int64 {
	n := s.bytes
	if db := s.part.db; db != nil && !s.done {
		m := db.Metrics()
		n += int64(m.MemTable.Size)
		if parts := s.pb.numParts(); parts > 0 {
			n += s.pb.cache.Size() / parts
		}
	}
	return n
}

// Commit writes version+1's delta to the checkpoint, then applies the
// changes and the new marker to the local database in one batch. The
// snapshot is not written here: Maintain writes it in the background once
// the version has committed.
func (s *pebStore) Commit(ctx context.Context, attempt string) (int, error) {
	if err := s.check("commit"); err != nil {
		return 0, err
	}
	defer s.release()
	next := s.version + 1
	changes := make([]change, 0, len(s.overlay)+1)
	if s.evictedBase {
		changes = append(changes, change{key: s.upper, below: true})
	}
	for k, e := range s.overlay {
		if e.dirty {
			changes = append(changes, change{key: []byte(k), value: e.val, del: e.del})
		}
	}
	writes := 0
	m := s.part.m
	m.version, m.rows = next, s.rows
	if len(changes) > 0 {
		// Durable in the checkpoint first: if the local write fails the
		// database still holds the old version, which its marker says.
		data := encodeFile(kindDelta, changes)
		if err := s.pb.store.Put(ctx, deltaKey(s.pb.opts.Operator, s.p, next, attempt), data); err != nil {
			return writes, fmt.Errorf("commit state partition %d version %d: %w", s.p, next, err)
		}
		writes++
		m.lastDelta, m.lastSum, m.lastAttempt = next, fileSum(data), attempt
	}
	b := s.part.db.NewBatch()
	defer b.Close()
	for _, c := range changes {
		var err error
		if c.below {
			// Before the batch's puts, as the delta applies it.
			err = b.DeleteRange([]byte{dataPrefix}, append([]byte{dataPrefix}, c.key...), nil)
		} else if c.del {
			err = b.Delete(s.dbKey(c.key), nil)
		} else {
			err = b.Set(s.dbKey(c.key), c.value, nil)
		}
		if err != nil {
			return writes, fmt.Errorf("commit state partition %d version %d locally: %w", s.p, next, err)
		}
	}
	if err := b.Set(markerKey, m.encode(), nil); err != nil {
		return writes, fmt.Errorf("commit state partition %d version %d locally: %w", s.p, next, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		s.part.ok = false // unknown: the next Open rebuilds
		return writes, fmt.Errorf("commit state partition %d version %d locally: %w", s.p, next, err)
	}
	s.part.ok, s.part.m = true, m
	return writes, nil
}

func (s *pebStore) release() {
	if s.done {
		return
	}
	s.done = true
	s.overlay = nil
	s.pb.release(s.part)
}

// Abort discards the changes; the local database is unchanged.
func (s *pebStore) Abort() { s.release() }
