package statestore

import (
	"bytes"
	"hash/maphash"

	"github.com/sluicehq/sluice/agg"
)

// memData is one in-memory partition's rows and the changes of the batch
// that has it open. With bounded keys (MemoryOptions.BoundPrefix: every
// key starts with its 8-byte event-time bound, as agg encodes windowed
// groups) it keeps a table per bound, so evicting closed windows drops
// their tables and touches no other row; otherwise one table holds
// every row.
//
// A batch changes the tables in place and lists each entry it changes
// once (memChange, with the entry's state in the opened version kept in
// its flags), which is all Commit needs to write the delta; a row the
// batch deletes stays in its slot, dead, until the commit removes it, so
// a key is one entry per table. Abort cannot undo in place: the provider
// drops the partition and the next Open loads it from the checkpoint.
type memData struct {
	seed    maphash.Seed
	bounded bool
	tables  map[uint64]*memTable
	// flat holds every row when not bounded, and keys shorter than eight
	// bytes when bounded.
	flat *memTable
	last *memTable // the bound table used last
	rows int64
	// bytes is the tables' memory (memTable.held summed), kept as they
	// change: the memory limit reads it every few changes, and a
	// partition may hold thousands of bounds' tables.
	bytes int64

	changes []memChange
	// upper is the largest bound given to EvictBelow this batch;
	// evictedBase whether the opened version had a row below it, in
	// which case the delta records the range deletion.
	upper       []byte
	evictedBase bool
}

// memChange is an entry the batch changed, or (idx -1) a table it
// evicted whole.
type memChange struct {
	t   *memTable
	idx int
}

func newMemData(bounded bool) *memData {
	return &memData{seed: maphash.MakeSeed(), bounded: bounded, tables: map[uint64]*memTable{}}
}

func newMemTable(prefix uint64) *memTable { return &memTable{prefix: prefix} }

// table returns the table key belongs in (nil if it has none and create
// is false).
func (d *memData) table(key []byte, create bool) *memTable {
	if !d.bounded || len(key) < 8 {
		if d.flat == nil && create {
			d.flat = newMemTable(0)
			d.bytes += d.flat.held()
		}
		return d.flat
	}
	p := prefixOf(key)
	if t := d.last; t != nil && t.prefix == p && !t.dropped {
		return t
	}
	t := d.tables[p]
	if t == nil {
		if !create {
			return nil
		}
		t = newMemTable(p)
		d.tables[p] = t
		d.bytes += t.held()
	}
	d.last = t
	return t
}

// record lists entry idx among the batch's changes the first time the
// batch changes it, noting whether it was a row of the opened version.
func (d *memData) record(t *memTable, idx int) {
	e := &t.ents[idx]
	if e.vlen&entChanged != 0 {
		return
	}
	e.vlen |= entChanged
	if e.live() {
		e.vlen |= entBase
	}
	if len(d.changes) == cap(d.changes) {
		changes := make([]memChange, len(d.changes), max(2*len(d.changes), 64))
		copy(changes, d.changes)
		d.changes = changes
	}
	d.changes = append(d.changes, memChange{t, idx})
}

// inBase reports whether entry e was a row of the opened version.
func inBase(e *memEnt) bool {
	if e.vlen&entChanged != 0 {
		return e.vlen&entBase != 0
	}
	return e.live()
}

func (d *memData) get(key []byte) ([]byte, bool) {
	t := d.table(key, false)
	if t == nil {
		return nil, false
	}
	idx, _ := t.find(key, hashKey(d.seed, key))
	if idx < 0 || !t.ents[idx].live() {
		return nil, false
	}
	return t.value(&t.ents[idx]), true
}

func (d *memData) put(key, value []byte) {
	t := d.table(key, true)
	before := t.held()
	h := hashKey(d.seed, key)
	idx, slot := t.find(key, h)
	if idx < 0 {
		idx = t.insert(key, h, slot)
	}
	d.record(t, idx)
	if !t.ents[idx].live() {
		d.rows++
	}
	t.setValue(idx, value)
	d.bytes += t.held() - before
}

func (d *memData) del(key []byte) {
	t := d.table(key, false)
	if t == nil {
		return
	}
	idx, _ := t.find(key, hashKey(d.seed, key))
	if idx < 0 || !t.ents[idx].live() {
		return
	}
	d.record(t, idx)
	before := t.held()
	t.kill(idx)
	d.bytes += t.held() - before
	d.rows--
}

// each calls fn for every table.
func (d *memData) each(fn func(t *memTable) error) error {
	if d.flat != nil {
		if err := fn(d.flat); err != nil {
			return err
		}
	}
	for _, t := range d.tables {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

func (d *memData) scan(fn func(key, value []byte) error) error {
	return d.each(func(t *memTable) error {
		for i := range t.ents {
			if e := &t.ents[i]; e.live() {
				if err := fn(t.key(e), t.value(e)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// evictBelow removes every row whose key is below upper, calling fn (if
// set) for each first, and returns how many it removed. A bound's table
// wholly below upper is dropped without visiting its rows unless fn
// needs them.
func (d *memData) evictBelow(upper []byte, fn func(key, value []byte) error) (int, error) {
	removed := 0
	// visit removes t's rows below upper (all of them when whole).
	visit := func(t *memTable, whole bool) error {
		for i := range t.ents {
			e := &t.ents[i]
			if whole && fn == nil && d.evictedBase {
				break // nothing left to learn from the rows
			}
			base, live := inBase(e), e.live()
			if !base && !live {
				continue
			}
			k := t.key(e)
			if !whole && bytes.Compare(k, upper) >= 0 {
				continue
			}
			d.evictedBase = d.evictedBase || base
			if !live {
				continue
			}
			if fn != nil {
				if err := fn(k, t.value(e)); err != nil {
					return err
				}
			}
			if !whole {
				d.record(t, i)
				before := t.held()
				t.kill(i)
				d.bytes += t.held() - before
				d.rows--
				removed++
			}
		}
		return nil
	}
	if d.flat != nil {
		if err := visit(d.flat, false); err != nil {
			return removed, err
		}
	}
	for p, t := range d.tables {
		all, some := below(p, upper)
		if !all && !some {
			continue
		}
		if err := visit(t, all); err != nil {
			return removed, err
		}
		if all {
			delete(d.tables, p)
			d.bytes -= t.held()
			t.dropped = true
			d.changes = append(d.changes, memChange{t, -1})
			d.rows -= int64(t.live)
			removed += t.live
		}
	}
	if d.upper == nil || bytes.Compare(upper, d.upper) > 0 {
		d.upper = append(d.upper[:0], upper...)
	}
	return removed, nil
}

// delta returns the batch's changes as a delta's entries: the range
// deletion first when the opened version had a row below the largest
// bound evicted, then each changed key's final state in key order (a
// deletion only for a row of the opened version the range does not
// cover). The keys and values are the tables' bytes.
func (d *memData) delta() []change {
	out := make([]change, 0, len(d.changes)+1)
	if d.evictedBase {
		out = append(out, change{key: d.upper, below: true})
	}
	start := len(out)
	for _, c := range d.changes {
		if c.idx < 0 || c.t.dropped {
			continue // under the range deletion
		}
		t := c.t
		e := &t.ents[c.idx]
		k := t.key(e)
		switch {
		case e.live():
			out = append(out, change{key: k, value: t.value(e)})
		case e.vlen&entBase == 0:
		case d.evictedBase && bytes.Compare(k, d.upper) < 0:
		default:
			out = append(out, change{key: k, del: true})
		}
	}
	rest := out[start:]
	keys := make([][]byte, len(rest))
	for i := range rest {
		keys[i] = rest[i].key
	}
	permute(rest, agg.SortKeys(keys))
	return out
}

// permute puts cs in the order given (cs[i] becomes the old cs[order[i]]),
// in place, following the permutation's cycles.
func permute(cs []change, order []int32) {
	for i := range order {
		if order[i] < 0 {
			continue
		}
		first := cs[i]
		j := i
		for {
			k := int(order[j])
			order[j] = -1
			if k == i {
				cs[j] = first
				break
			}
			cs[j] = cs[k]
			j = k
		}
	}
}

// finish ends the batch (committed): the rows it deleted leave their
// slots, empty bound tables go, tables heavy with garbage are rebuilt.
func (d *memData) finish() {
	for _, c := range d.changes {
		if c.idx < 0 || c.t.dropped {
			continue
		}
		t := c.t
		e := &t.ents[c.idx]
		e.vlen &^= entChanged | entBase
		if !e.live() {
			k := t.key(e)
			idx, slot := t.find(k, hashKey(d.seed, k))
			t.remove(idx, slot)
		}
	}
	if len(d.changes) > 0 {
		for p, t := range d.tables {
			if t.live == 0 {
				delete(d.tables, p)
				continue
			}
			t.compact(d.seed)
		}
		if d.flat != nil {
			d.flat.compact(d.seed)
		}
	}
	clear(d.changes)
	if cap(d.changes) > 1<<12 {
		d.changes = nil
	}
	d.changes = d.changes[:0]
	d.upper, d.evictedBase, d.last = nil, false, nil
	d.bytes = 0
	d.each(func(t *memTable) error { d.bytes += t.held(); return nil })
}

// held estimates the partition's memory: its tables and the batch's list
// of changes.
func (d *memData) held() int64 { return d.bytes + int64(cap(d.changes))*16 }

// copyRows returns every row, sharing the tables' bytes (which are never
// overwritten), for a snapshot written without a lock.
func (d *memData) copyRows() []memEntry {
	out := make([]memEntry, 0, d.rows)
	d.scan(func(k, v []byte) error {
		out = append(out, memEntry{k, v})
		return nil
	})
	return out
}
