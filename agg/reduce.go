package agg

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// State is what Reduce needs of a state partition at one version.
type State interface {
	Get(key []byte) ([]byte, bool, error)
	Put(key, value []byte) error
	Delete(key []byte) error
	// Scan calls fn for every row, in any order; fn must not modify the
	// state. Keys and values are valid only during the call.
	Scan(fn func(key, value []byte) error) error
}

// ReduceStats reports what a reduce changed.
type ReduceStats struct {
	// Updated counts groups written this batch (numRowsUpdated).
	Updated int64
	// Removed counts groups evicted by the watermark.
	Removed int64
}

// Reduce merges the partials of every map task (partials[m] from map m, in
// map order, so floating-point sums are deterministic) into the state
// partition and returns the rows to emit, sorted by key, per output mode:
//
//   - append: every group whose bound is at or before wm.Evict is emitted
//     once, with its final value, and removed (rule 8);
//   - update: every group touched by this batch is emitted with its new
//     value, then groups at or before wm.Evict are removed silently (rule 9);
//   - complete: every group is emitted; nothing is removed (rule 10).
//
// Late partials were already dropped on the map side (Table.Add).
func (l *Layout) Reduce(st State, partials [][]Entry, wm eventtime.Batch) ([]row.Row, ReduceStats, error) {
	var stats ReduceStats
	nm := len(l.Measures)
	// Sized for the largest map task's groups (a lower bound on the
	// distinct groups, so never more than they need, however many map
	// tasks saw the same groups): the map grows less and the groups'
	// accumulators come from a few slabs. kb carries keys to the State
	// calls without an allocation each.
	n := 0
	for _, entries := range partials {
		n = max(n, len(entries))
	}
	touched := make(map[string][]Acc, n)
	order := make([]string, 0, n)
	slab := make([]Acc, n*nm)
	var kb []byte
	for _, entries := range partials {
		for _, e := range entries {
			accs, ok := touched[e.Key]
			if !ok {
				if len(slab) < nm {
					slab = make([]Acc, 256*nm)
				}
				accs, slab = slab[:nm:nm], slab[nm:]
				kb = append(kb[:0], e.Key...)
				old, found, err := st.Get(kb)
				if err != nil {
					return nil, stats, fmt.Errorf("reduce: read state: %w", err)
				}
				if found {
					if err := l.DecodeAccs(old, accs); err != nil {
						return nil, stats, fmt.Errorf("reduce: %w", err)
					}
				}
				touched[e.Key] = accs
				order = append(order, e.Key)
			}
			for i := range l.Measures {
				l.Measures[i].merge(&accs[i], &e.Accs[i])
			}
		}
	}
	var buf []byte
	for _, k := range order {
		buf = l.AppendAccs(buf[:0], touched[k])
		kb = append(kb[:0], k...)
		if err := st.Put(kb, buf); err != nil {
			return nil, stats, fmt.Errorf("reduce: write state: %w", err)
		}
	}
	stats.Updated = int64(len(order))

	type keyed struct {
		key string
		row row.Row
	}
	var out []keyed
	emit := func(key string, accs []Acc) error {
		r, err := l.OutputRow([]byte(key), accs)
		if err != nil {
			return err
		}
		out = append(out, keyed{key, r})
		return nil
	}
	var evict []string
	scanEvictable := func(withRows bool) error {
		if l.Bound == NoBound {
			return nil
		}
		accs := make([]Acc, nm)
		return st.Scan(func(key, value []byte) error {
			end, _ := l.boundEnd(key)
			if !eventtime.Evictable(end, wm.Evict) {
				return nil
			}
			k := string(key)
			evict = append(evict, k)
			if !withRows {
				return nil
			}
			if err := l.DecodeAccs(value, accs); err != nil {
				return err
			}
			return emit(k, accs)
		})
	}
	switch l.Mode {
	case query.Append:
		if err := scanEvictable(true); err != nil {
			return nil, stats, fmt.Errorf("reduce: %w", err)
		}
	case query.Update:
		for _, k := range order {
			if err := emit(k, touched[k]); err != nil {
				return nil, stats, fmt.Errorf("reduce: %w", err)
			}
		}
		if err := scanEvictable(false); err != nil {
			return nil, stats, fmt.Errorf("reduce: %w", err)
		}
	case query.Complete:
		accs := make([]Acc, nm)
		err := st.Scan(func(key, value []byte) error {
			if err := l.DecodeAccs(value, accs); err != nil {
				return err
			}
			return emit(string(key), accs)
		})
		if err != nil {
			return nil, stats, fmt.Errorf("reduce: %w", err)
		}
	}
	for _, k := range evict {
		kb = append(kb[:0], k...)
		if err := st.Delete(kb); err != nil {
			return nil, stats, fmt.Errorf("reduce: evict: %w", err)
		}
	}
	stats.Removed = int64(len(evict))
	slices.SortFunc(out, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	rows := make([]row.Row, len(out))
	for i := range out {
		rows[i] = out[i].row
	}
	return rows, stats, nil
}

// OutputRow builds the output row of one group from its key and
// accumulators: window_start, window_end (if windowed), the groupBy values,
// then the measures.
func (l *Layout) OutputRow(key []byte, accs []Acc) (row.Row, error) {
	r := make(row.Row, 0, len(l.Output))
	rest := key
	switch l.Bound {
	case WindowBound, TimeBound:
		start := readInt64(rest)
		rest = rest[8:]
		if l.Bound == WindowBound {
			r = append(r, row.TimestampValue(start), row.TimestampValue(start+l.Window.Size))
		}
	default:
		if l.WindowCol >= 0 {
			start := readInt64(rest)
			rest = rest[8:]
			r = append(r, row.TimestampValue(start), row.TimestampValue(start+l.Window.Size))
		}
	}
	for _, k := range l.GroupKinds {
		var v row.Value
		var err error
		v, rest, err = readValue(rest, k)
		if err != nil {
			return nil, err
		}
		r = append(r, v)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode key: %d trailing bytes", len(rest))
	}
	for i := range l.Measures {
		r = append(r, l.Measures[i].result(&accs[i]))
	}
	return r, nil
}

// CompareKeys orders encoded keys (bytes order).
func CompareKeys(a, b []byte) int { return bytes.Compare(a, b) }
