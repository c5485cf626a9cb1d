package statestore

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
)

// The in-memory provider's rows (memory.go) live in memTables: open
// addressing over entry indexes, with keys and values in append-only
// chunks of bytes. Nothing in a table is a Go pointer per row (the
// chunks are a few pointers per table), so the garbage collector does not
// scan the state, and a batch's changes are applied in place instead of
// into an overlay map that the commit applies again (the profile of a
// million distinct groups spent a third of the reduce in those maps:
// hashing, probing and growing them twice per changed group).
//
// Bytes in a chunk are never overwritten: a new value is appended and the
// entry points at it, so a slice handed out (by Get, Scan or a snapshot's
// copy) keeps its bytes whatever the batch does next. The garbage this
// leaves is reclaimed by rebuilding a table into fresh chunks (compact)
// when it outweighs the live bytes.

const (
	// entLive marks a live entry (a row); entBase, valid while entChanged
	// is set, whether the row existed in the version the batch opened;
	// entChanged, that the batch has recorded the entry in its changes.
	entLive    = 1 << 31
	entBase    = 1 << 30
	entChanged = 1 << 29
	// lenMask keeps a value's length (at most maxEntryBytes, 2^28).
	lenMask = 1<<29 - 1

	// slotTomb marks a slot whose entry was removed; 0 is an empty slot.
	slotTomb = math.MaxUint32

	firstChunkBytes = 256
	maxChunkBytes   = 64 << 10
	// entBytes and slotBytes are the sizes of memEnt and a slot.
	entBytes  = 24
	slotBytes = 8
	// tableBytes is a table's fixed overhead, in the estimate of memory.
	tableBytes = 256
)

// memEnt is one row: where its key and value are in the chunks.
type memEnt struct {
	kloc, vloc uint64 // chunk<<32 | offset
	klen       uint32
	vlen       uint32 // length | entLive | entBase | entChanged
}

func (e *memEnt) live() bool { return e.vlen&entLive != 0 }

// memTable is a hash table of rows. It is not safe for concurrent
// changes; readers may share it with no writer.
type memTable struct {
	// prefix is the rows' first eight bytes (big-endian) when the table
	// is one bound's, see memData.
	prefix uint64
	// slots hold hash<<32 | entry index+1 (0: empty, slotTomb: removed).
	slots  []uint64
	ents   []memEnt
	chunks [][]byte
	used   int // slots not empty (tombstones included)
	// live rows, the bytes of their keys and values, entries removed (no
	// longer in a slot) and arena bytes no entry points at.
	live    int
	kv      int64
	removed int
	garbage int64
	// dropped is set when EvictBelow removed the whole table this batch.
	dropped bool
}

// hashKey is a key's hash; its low 32 bits place it and tell keys apart
// before their bytes are compared.
func hashKey(seed maphash.Seed, key []byte) uint32 {
	h := maphash.Bytes(seed, key)
	return uint32(h ^ h>>32)
}

func (t *memTable) key(e *memEnt) []byte   { return t.at(e.kloc, e.klen) }
func (t *memTable) value(e *memEnt) []byte { return t.at(e.vloc, e.vlen&lenMask) }

func (t *memTable) at(loc uint64, n uint32) []byte {
	c := t.chunks[loc>>32]
	off := uint32(loc)
	return c[off : off+n : off+n]
}

// add copies b into the chunks and returns where it went.
func (t *memTable) add(b []byte) uint64 {
	i := len(t.chunks) - 1
	if i < 0 || cap(t.chunks[i])-len(t.chunks[i]) < len(b) {
		size := firstChunkBytes
		if i >= 0 {
			size = min(2*cap(t.chunks[i]), maxChunkBytes)
		}
		t.chunks = append(t.chunks, make([]byte, 0, max(size, len(b))))
		i++
	}
	c := t.chunks[i]
	off := len(c)
	t.chunks[i] = append(c, b...)
	return uint64(i)<<32 | uint64(off)
}

// find returns the index of key's entry (live or not) and its slot, or
// -1 and the slot where it would go.
func (t *memTable) find(key []byte, h uint32) (int, int) {
	if len(t.slots) == 0 {
		return -1, -1
	}
	mask := len(t.slots) - 1
	free := -1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		switch {
		case s == 0:
			if free < 0 {
				free = i
			}
			return -1, free
		case uint32(s) == slotTomb:
			if free < 0 {
				free = i
			}
		case uint32(s>>32) == h:
			idx := int(uint32(s)) - 1
			e := &t.ents[idx]
			if int(e.klen) == len(key) && bytes.Equal(t.key(e), key) {
				return idx, i
			}
		}
	}
}

// insert adds a new entry for key (not in the table) and returns it.
func (t *memTable) insert(key []byte, h uint32, slot int) int {
	if slot < 0 || (t.slots[slot] == 0 && 4*(t.used+1) > 3*len(t.slots)) {
		t.grow()
		_, slot = t.find(key, h)
	}
	if t.slots[slot] == 0 {
		t.used++
	}
	idx := len(t.ents)
	if idx == cap(t.ents) {
		// Doubling (append grows large slices by a quarter, copying the
		// entries over and over).
		ents := make([]memEnt, idx, max(2*idx, 16))
		copy(ents, t.ents)
		t.ents = ents
	}
	t.ents = append(t.ents, memEnt{kloc: t.add(key), klen: uint32(len(key))})
	t.slots[slot] = uint64(h)<<32 | uint64(idx+1)
	return idx
}

// grow doubles the slots (or rebuilds them at the same size when
// tombstones fill them), keeping every entry that has a slot.
func (t *memTable) grow() {
	n := len(t.slots)
	switch {
	case n == 0:
		n = 8
	case 2*(t.used-t.tombs()) >= n:
		n *= 2
	}
	old := t.slots
	t.slots = make([]uint64, n)
	t.used = 0
	mask := n - 1
	for _, s := range old {
		if s == 0 || uint32(s) == slotTomb {
			continue
		}
		i := int(uint32(s>>32)) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
		t.used++
	}
}

// tombs counts the removed entries' slots.
func (t *memTable) tombs() int {
	n := 0
	for _, s := range t.slots {
		if s != 0 && uint32(s) == slotTomb {
			n++
		}
	}
	return n
}

// setValue points entry idx at a copy of value and makes it live.
func (t *memTable) setValue(idx int, value []byte) {
	e := &t.ents[idx]
	if e.live() {
		n := e.vlen & lenMask
		t.garbage += int64(n)
		t.kv -= int64(n)
	} else {
		t.live++
		t.kv += int64(e.klen)
	}
	e.vloc = t.add(value)
	e.vlen = e.vlen&^lenMask | uint32(len(value)) | entLive
	t.kv += int64(len(value))
}

// kill makes live entry idx dead; it keeps its slot until removed.
func (t *memTable) kill(idx int) {
	e := &t.ents[idx]
	n := e.vlen & lenMask
	t.live--
	t.kv -= int64(e.klen) + int64(n)
	e.vlen &^= entLive
}

// remove takes dead entry idx (in slot) out of the table.
func (t *memTable) remove(idx, slot int) {
	e := &t.ents[idx]
	t.slots[slot] = slotTomb
	t.removed++
	t.garbage += int64(e.klen) + int64(e.vlen&lenMask)
	e.vlen = 0
}

// compact rebuilds the table into fresh slots, entries and chunks holding
// only its live rows, when removed entries or unreferenced bytes outweigh
// them. Slices handed out before keep the old chunks' bytes.
func (t *memTable) compact(seed maphash.Seed) {
	if t.removed <= max(t.live, 64) && t.garbage <= max(t.kv, maxChunkBytes) {
		return
	}
	old := *t
	*t = memTable{prefix: old.prefix}
	if old.live == 0 {
		return
	}
	size := 8
	for 3*size < 4*old.live+4 {
		size *= 2
	}
	t.slots = make([]uint64, size)
	t.ents = make([]memEnt, 0, old.live)
	for i := range old.ents {
		e := &old.ents[i]
		if !e.live() {
			continue
		}
		k := old.key(e)
		h := hashKey(seed, k)
		_, slot := t.find(k, h)
		idx := t.insert(k, h, slot)
		t.setValue(idx, old.value(e))
	}
}

// held estimates the table's memory: its slots and entries, and the bytes
// of keys and values in its chunks, live or not yet reclaimed (not the
// chunks' room to grow, at most one small chunk's worth).
func (t *memTable) held() int64 {
	return tableBytes + t.kv + t.garbage + int64(len(t.ents))*entBytes + int64(len(t.slots))*slotBytes
}

// prefixOf reads a bounded key's first eight bytes.
func prefixOf(key []byte) uint64 { return binary.BigEndian.Uint64(key) }

// below classifies a bound's table against upper: all its rows are below
// upper, none is, or each must be compared.
func below(prefix uint64, upper []byte) (all, some bool) {
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], prefix)
	if len(upper) < 8 {
		// A row is below upper exactly when its first len(upper) bytes are.
		return bytes.Compare(p[:len(upper)], upper) < 0, false
	}
	switch c := bytes.Compare(p[:], upper[:8]); {
	case c < 0:
		return true, false
	case c > 0 || len(upper) == 8:
		return false, false
	}
	return false, true
}
