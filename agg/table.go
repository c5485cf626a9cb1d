package agg

import (
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

// Table folds rows into partial aggregates: the map side of a batch.
// It is not safe for concurrent use; a map task owns one.
type Table struct {
	l       *Layout
	index   map[string]int32
	keys    []string
	accs    []Acc
	key     []byte
	wins    []int64
	scratch []byte
}

// NewTable returns an empty table for the layout.
func NewTable(l *Layout) *Table {
	return &Table{l: l, index: make(map[string]int32)}
}

// Len returns the number of groups.
func (t *Table) Len() int { return len(t.keys) }

// Add folds one decoded row into the table, assigning it to its windows.
// In append and update modes with a watermark on the grouping's event-time
// column, a (row, window) whose bound is at or before wLate is dropped as
// late (docs/semantics.md, "Late rows"); Add returns how many were dropped. A row with
// a null event time is skipped before windowing and not counted.
func (t *Table) Add(r row.Row, wLate eventtime.Watermark) (dropped int) {
	l := t.l
	switch {
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
	slot, ok := t.index[string(t.key)]
	if !ok {
		slot = int32(len(t.keys))
		k := string(t.key)
		t.index[k] = slot
		t.keys = append(t.keys, k)
		for i := 0; i < nm; i++ {
			t.accs = append(t.accs, Acc{})
		}
	}
	accs := t.accs[int(slot)*nm : int(slot+1)*nm]
	for i := range t.l.Measures {
		t.scratch = t.l.Measures[i].update(&accs[i], r, t.scratch)
	}
}

// Entry is one group's partial aggregate.
type Entry struct {
	Key  string
	Accs []Acc
}

// Partition splits the table's groups by state partition (n partitions),
// each in the order the groups were first seen.
func (t *Table) Partition(n int) [][]Entry {
	out := make([][]Entry, n)
	nm := len(t.l.Measures)
	for slot, k := range t.keys {
		p := PartitionOf([]byte(k), n)
		out[p] = append(out[p], Entry{Key: k, Accs: t.accs[slot*nm : (slot+1)*nm]})
	}
	return out
}
