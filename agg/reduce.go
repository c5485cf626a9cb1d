package agg

import (
	"bytes"
	"fmt"
	"math"

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

// RangeEvicter is a State that removes every row below a key at once.
// Keys order as bytes and start with their bound (key.go), so the groups
// a watermark closes are exactly the keys below one key: Reduce evicts
// them with EvictBelow instead of scanning the partition for them.
type RangeEvicter interface {
	// EvictBelow removes every row whose key is below upper (bytes
	// order), calling fn, when it is not nil, for each of them first (in
	// any order; key and value valid only during the call; fn must not
	// change the state). It returns how many rows it removed.
	EvictBelow(upper []byte, fn func(key, value []byte) error) (int, error)
}

// ReduceStats reports what a reduce changed.
type ReduceStats struct {
	// Updated counts groups written this batch (numRowsUpdated).
	Updated int64
	// Removed counts groups evicted by the watermark.
	Removed int64
}

// EvictBound returns the key below which every group is final against
// watermark w (docs/semantics.md, rule 8: a group whose bound is at or
// before w), and false when the layout evicts nothing or no group can be
// final yet. Keys start with the window start (the bound is start+size)
// or the raw time, big-endian with the sign flipped, so "bound <= w" is
// "key below the encoding of the largest such start, plus one".
func (l *Layout) EvictBound(w eventtime.Watermark) ([]byte, bool) {
	var last int64
	switch l.Bound {
	case WindowBound:
		if int64(w) < math.MinInt64+l.Window.Size {
			return nil, false
		}
		last = int64(w) - l.Window.Size
	case TimeBound:
		last = int64(w)
	case SessionBound:
		// Index keys start with a session's end, always below the
		// primary keys' prefix (session.go).
		if int64(w) >= math.MaxInt64-1 {
			return []byte(sessionPrimaryPrefix), true
		}
		last = int64(w)
	default:
		return nil, false
	}
	if last == math.MaxInt64 {
		// Past every key: the largest prefix is followed by a value's tag
		// (at most tagString) or nothing.
		return append(appendInt64(nil, last), 0xFF), true
	}
	return appendInt64(nil, last+1), true
}

// BoundPrefix reports whether every key starts with an 8-byte event-time
// value (the window start or the raw time), so a state store can keep
// the groups of one bound together (statestore.MemoryOptions.BoundPrefix).
func (l *Layout) BoundPrefix() bool { return l.Bound != NoBound || l.WindowCol >= 0 || l.Session }

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
// Late partials were already dropped on the map side (Table.Add). A group
// this batch touches and closes is emitted from the merge and never
// written; the closed groups are removed with one EvictBelow when the
// state is a RangeEvicter (else by a scan and a Delete each).
func (l *Layout) Reduce(st State, partials [][]Entry, wm eventtime.Batch) ([]row.Row, ReduceStats, error) {
	if l.Session {
		return l.reduceSessions(st, partials, wm)
	}
	var stats ReduceStats
	nm := len(l.Measures)
	// Sized for the groups of every map task (map tasks read different
	// rows, often different windows, so their groups rarely repeat: 20
	// tasks of a tile batch at 1 M courses), but past 2^18 groups never
	// more than eight times the largest task's (its groups are a lower
	// bound on the distinct ones), so many tasks that saw the same
	// groups do not size it for their sum. kb carries keys to the State
	// calls without an allocation each.
	n, sum := 0, 0
	for _, entries := range partials {
		n, sum = max(n, len(entries)), sum+len(entries)
	}
	n = min(sum, max(8*n, 1<<18))
	touched := make(map[string]int32, n)
	keys := make([]string, 0, n)
	found := make([]bool, 0, n)
	accs := make([]Acc, 0, n*nm)
	var kb []byte
	for _, entries := range partials {
		for _, e := range entries {
			g, ok := touched[e.Key]
			if !ok {
				g = int32(len(keys))
				touched[e.Key] = g
				keys = append(keys, e.Key)
				accs = append(accs, make([]Acc, nm)...)
				kb = append(kb[:0], e.Key...)
				old, ok, err := st.Get(kb)
				if err != nil {
					return nil, stats, fmt.Errorf("reduce: read state: %w", err)
				}
				if ok {
					if err := l.DecodeAccs(old, accs[int(g)*nm:int(g+1)*nm]); err != nil {
						return nil, stats, fmt.Errorf("reduce: %w", err)
					}
				}
				found = append(found, ok)
			}
			a := accs[int(g)*nm : int(g+1)*nm]
			for i := range l.Measures {
				l.Measures[i].merge(&a[i], &e.Accs[i])
			}
		}
	}
	stats.Updated = int64(len(keys))

	upper, evicts := l.EvictBound(wm.Evict)
	if l.Mode == query.Complete {
		evicts = false
	}
	out := emitter{l: l, keys: make([]string, 0, len(keys)), meas: make([]row.Value, 0, len(keys)*nm)}
	var buf []byte
	for g, k := range keys {
		a := accs[g*nm : (g+1)*nm]
		if evicts && k < string(upper) {
			// Closed by this batch: emitted now (both modes), never
			// written; EvictBelow removes what the state held for it.
			if !found[g] {
				stats.Removed++
			}
			out.add(k, a)
			continue
		}
		buf = l.AppendAccs(buf[:0], a)
		kb = append(kb[:0], k...)
		if err := st.Put(kb, buf); err != nil {
			return nil, stats, fmt.Errorf("reduce: write state: %w", err)
		}
		if l.Mode == query.Update {
			out.add(k, a)
		}
	}
	if evicts {
		var fn func(key, value []byte) error
		if l.Mode == query.Append {
			tmp := make([]Acc, nm)
			fn = func(key, value []byte) error {
				if _, ok := touched[string(key)]; ok {
					return nil // emitted above, with this batch's partials
				}
				if err := l.DecodeAccs(value, tmp); err != nil {
					return err
				}
				out.add(string(key), tmp)
				return nil
			}
		}
		removed, err := EvictBelow(st, upper, fn)
		if err != nil {
			return nil, stats, fmt.Errorf("reduce: evict: %w", err)
		}
		stats.Removed += int64(removed)
	}
	if l.Mode == query.Complete {
		a := make([]Acc, nm)
		err := st.Scan(func(key, value []byte) error {
			if err := l.DecodeAccs(value, a); err != nil {
				return err
			}
			out.add(string(key), a)
			return nil
		})
		if err != nil {
			return nil, stats, fmt.Errorf("reduce: %w", err)
		}
	}
	rows, err := out.sorted()
	if err != nil {
		return nil, stats, fmt.Errorf("reduce: %w", err)
	}
	return rows, stats, nil
}

// EvictBelow removes every row of st whose key is below upper (bytes
// order), calling fn (when not nil) for each first, and returns how many
// it removed: through RangeEvicter when st has it, else by a scan and a
// Delete per key. fn must not change the state.
func EvictBelow(st State, upper []byte, fn func(key, value []byte) error) (int, error) {
	if re, ok := st.(RangeEvicter); ok {
		return re.EvictBelow(upper, fn)
	}
	return evictByScan(st, upper, fn)
}

// evictByScan is EvictBelow for a State without it: a scan, then a
// Delete per key.
func evictByScan(st State, upper []byte, fn func(key, value []byte) error) (int, error) {
	var below []string
	err := st.Scan(func(key, value []byte) error {
		if bytes.Compare(key, upper) >= 0 {
			return nil
		}
		below = append(below, string(key))
		if fn != nil {
			return fn(key, value)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var kb []byte
	for _, k := range below {
		kb = append(kb[:0], k...)
		if err := st.Delete(kb); err != nil {
			return 0, err
		}
	}
	return len(below), nil
}

// emitter collects a reduce's output: each row's key and measure values
// as it is emitted, then the rows built in key order into one slab, so
// that what reads them next (the sink's split and its column-by-column
// encoding) walks memory in order instead of jumping to each row.
type emitter struct {
	l    *Layout
	keys []string
	meas []row.Value // len(l.Measures) per row
}

func (e *emitter) add(key string, accs []Acc) {
	e.keys = append(e.keys, key)
	for i := range e.l.Measures {
		e.meas = append(e.meas, e.l.Measures[i].result(&accs[i]))
	}
}

// sorted returns the rows in key order.
func (e *emitter) sorted() ([]row.Row, error) {
	if len(e.keys) == 0 {
		return nil, nil
	}
	w, nm := len(e.l.Output), len(e.l.Measures)
	slab := make([]row.Value, 0, len(e.keys)*w)
	rows := make([]row.Row, len(e.keys))
	for i, o := range SortKeys(e.keys) {
		start := len(slab)
		var err error
		if slab, err = e.l.appendKeyValues(slab, e.keys[o]); err != nil {
			return nil, err
		}
		slab = append(slab, e.meas[int(o)*nm:int(o+1)*nm]...)
		rows[i] = slab[start:len(slab):len(slab)]
	}
	return rows, nil
}

// OutputRow builds the output row of one group from its key and
// accumulators: window_start, window_end (if windowed), the groupBy values,
// then the measures.
func (l *Layout) OutputRow(key []byte, accs []Acc) (row.Row, error) {
	r, err := l.appendKeyValues(make(row.Row, 0, len(l.Output)), string(key))
	if err != nil {
		return nil, err
	}
	for i := range l.Measures {
		r = append(r, l.Measures[i].result(&accs[i]))
	}
	return r, nil
}

// appendKeyValues appends the output row's values a key holds: window
// start and end (if windowed), then the groupBy values. A string value is
// a substring of key.
func (l *Layout) appendKeyValues(r []row.Value, key string) ([]row.Value, error) {
	rest := key
	start := func() (int64, error) {
		if len(rest) < 8 {
			return 0, fmt.Errorf("decode key: truncated bound")
		}
		v := int64(uint64(rest[0])<<56|uint64(rest[1])<<48|uint64(rest[2])<<40|uint64(rest[3])<<32|
			uint64(rest[4])<<24|uint64(rest[5])<<16|uint64(rest[6])<<8|uint64(rest[7])) ^ math.MinInt64
		rest = rest[8:]
		return v, nil
	}
	switch {
	case l.Session:
		s, err := start()
		if err != nil {
			return nil, err
		}
		e, err := start()
		if err != nil {
			return nil, err
		}
		r = append(r, row.TimestampValue(s), row.TimestampValue(e))
	case l.Bound == TimeBound:
		if _, err := start(); err != nil {
			return nil, err
		}
	case l.Bound == WindowBound || l.WindowCol >= 0:
		s, err := start()
		if err != nil {
			return nil, err
		}
		r = append(r, row.TimestampValue(s), row.TimestampValue(s+l.Window.Size))
	}
	for _, k := range l.GroupKinds {
		var v row.Value
		var err error
		v, rest, err = readValueString(rest, k)
		if err != nil {
			return nil, err
		}
		r = append(r, v)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode key: %d trailing bytes", len(rest))
	}
	return r, nil
}

// CompareKeys orders encoded keys (bytes order).
func CompareKeys(a, b []byte) int { return bytes.Compare(a, b) }
