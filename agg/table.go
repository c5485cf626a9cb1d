package agg

import (
	"bytes"
	"hash/maphash"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

// Table folds rows into partial aggregates: the map side of a batch.
// It is not safe for concurrent use; a map task owns one.
//
// Groups are found through open addressing over their numbers, their
// keys back to back in one buffer: no string or map entry per group while
// rows are folded (a million distinct groups made the map task's Go map,
// its key strings and their growth a third of its work and most of its
// garbage). Partition turns the buffer into one string whose substrings
// are the entries' keys.
type Table struct {
	l    *Layout
	seed maphash.Seed
	// slots hold hash<<32 | group+1 (0: empty); group g's key is
	// arena[ends[g-1]:ends[g]].
	slots   []uint64
	ends    []int
	arena   []byte
	accs    []Acc
	key     []byte
	wins    []int64
	scratch []byte
}

// NewTable returns an empty table for the layout.
func NewTable(l *Layout) *Table {
	return &Table{l: l, seed: maphash.MakeSeed()}
}

// Len returns the number of groups.
func (t *Table) Len() int { return len(t.ends) }

// keyOf is group g's key.
func (t *Table) keyOf(g int) []byte {
	start := 0
	if g > 0 {
		start = t.ends[g-1]
	}
	return t.arena[start:t.ends[g]]
}

// Add folds one decoded row into the table, assigning it to its windows.
// In append and update modes with a watermark on the grouping's event-time
// column, a (row, window) whose bound is at or before wLate is dropped as
// late (docs/semantics.md, "Late rows"); Add returns how many were dropped. A row with
// a null event time is skipped before windowing and not counted. With a
// session window, Add is AddSession with the layout's gap.
func (t *Table) Add(r row.Row, wLate eventtime.Watermark) (dropped int) {
	l := t.l
	switch {
	case l.Session:
		// With a dynamic gap (Gap 0) the caller calls AddSession with
		// each row's; here a gap <= 0 drops the row, as Spark's filter
		// on session_window does.
		return t.AddSession(r, l.Gap, wLate)
	case l.WindowCol >= 0:
		v := r[l.WindowCol]
		if v.Kind == row.Null {
			return 0
		}
		t.wins = l.Window.Windows(v.I, t.wins[:0])
		for _, start := range t.wins {
			if l.Bound == WindowBound && eventtime.Late(start+l.Window.Size, wLate) {
				dropped++
				continue
			}
			t.key = t.appendGroups(appendInt64(t.key[:0], start), r)
			t.fold(r)
		}
	case l.Bound == TimeBound:
		v := r[l.GroupCols[l.BoundGroup]]
		if v.Kind == row.Null {
			return 0
		}
		if eventtime.Late(v.I, wLate) {
			return 1
		}
		t.key = t.appendGroups(appendInt64(t.key[:0], v.I), r)
		t.fold(r)
	default:
		t.key = t.appendGroups(t.key[:0], r)
		t.fold(r)
	}
	return dropped
}

func (t *Table) appendGroups(b []byte, r row.Row) []byte {
	for _, c := range t.l.GroupCols {
		b = appendValue(b, r[c])
	}
	return b
}

func (t *Table) fold(r row.Row) {
	nm := len(t.l.Measures)
	g := t.group()
	accs := t.accs[g*nm : (g+1)*nm]
	for i := range t.l.Measures {
		t.scratch = t.l.Measures[i].update(&accs[i], r, t.scratch)
	}
}

// group returns the number of t.key's group, adding the group if new.
func (t *Table) group() int {
	h := maphash.Bytes(t.seed, t.key)
	h32 := uint32(h ^ h>>32)
	if 4*(len(t.ends)+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	i := int(h32) & mask
	for ; t.slots[i] != 0; i = (i + 1) & mask {
		if s := t.slots[i]; uint32(s>>32) == h32 {
			if g := int(uint32(s)) - 1; bytes.Equal(t.keyOf(g), t.key) {
				return g
			}
		}
	}
	g := len(t.ends)
	t.slots[i] = uint64(h32)<<32 | uint64(g+1)
	t.arena = append(t.arena, t.key...)
	t.ends = append(t.ends, len(t.arena))
	nm := len(t.l.Measures)
	if n := len(t.accs) + nm; n > cap(t.accs) {
		// Doubling: append's growth for large slices copies these
		// 56-byte accumulators about five times over.
		accs := make([]Acc, len(t.accs), max(2*cap(t.accs), 64*nm))
		copy(accs, t.accs)
		t.accs = accs
	}
	t.accs = t.accs[:len(t.accs)+nm]
	return g
}

// grow doubles the slots.
func (t *Table) grow() {
	n := max(64, 2*len(t.slots))
	old := t.slots
	t.slots = make([]uint64, n)
	mask := n - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := int(uint32(s>>32)) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// Entry is one group's partial aggregate.
type Entry struct {
	Key  string
	Accs []Acc
}

// Partition splits the table's groups by state partition (n partitions),
// each in the order the groups were first seen. The entries' keys are
// substrings of one string holding every key. For a session window, a
// key's sessions go to the partition of the key alone, merged where they
// overlap or touch and sorted by (key, start); merging changes the
// table's accumulators, so Partition is called once.
func (t *Table) Partition(n int) [][]Entry {
	out := make([][]Entry, n)
	nm := len(t.l.Measures)
	parts := make([]int32, len(t.ends))
	counts := make([]int, n)
	start := 0
	for g, end := range t.ends {
		k := t.arena[start:end]
		if t.l.Session {
			// A key's sessions share a partition: hash the key without
			// the session (Spark's keyWithoutSession distribution).
			k = k[:len(k)-sessionSuffix]
		}
		p := PartitionOf(k, n)
		parts[g] = int32(p)
		counts[p]++
		start = end
	}
	for p, c := range counts {
		if c > 0 {
			out[p] = make([]Entry, 0, c)
		}
	}
	keys := string(t.arena)
	start = 0
	for g, end := range t.ends {
		p := parts[g]
		out[p] = append(out[p], Entry{Key: keys[start:end], Accs: t.accs[g*nm : (g+1)*nm]})
		start = end
	}
	if t.l.Session {
		for p := range out {
			out[p] = t.l.mergeSessions(out[p])
		}
	}
	return out
}
