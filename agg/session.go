package agg

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Session windows: Spark's session_window(column, gap), as
// docs/semantics.md ("Session windows") states it and Spark's
// MergingSessionsExec, SessionWindowStateStoreRestoreExec and
// SessionWindowStateStoreSaveExec apply it.
//
// A row opens the session [t, t+gap). Within one key (the groupBy values),
// sessions sorted by start merge when the next one starts at or before the
// current end; the merged end is the largest end, and the merged measures
// are the accumulators merged.
//
// Map side (Table): a row is dropped as late when its own session ends at
// or before W_late (SessionLate: the watermark is on the session column;
// in every output mode, as Spark's restore operator filters its input
// whatever the mode); then it is folded into the partial of (key, start,
// end), and Partition merges each partition's partials of a key into
// sessions (Spark's optional local MergingSessionsExec; merging is
// associative, so it changes nothing but the shuffle's size). A partial's
// key is the group key, then the session's start and end (8 bytes each,
// order-preserving), and its state partition is the hash of the group key
// alone, so every session of a key meets in one reduce.
//
// Reduce side (Layout.Reduce): the batch's sessions of each key touched
// are merged with the key's stored sessions; in append mode the sessions
// whose end is at or before W_evict are emitted once and leave the state,
// with those of keys the batch did not touch; in complete mode every
// session of the partition is emitted after each batch and nothing
// leaves. Update mode is refused at validation, as Spark refuses it.
//
// State: one primary row per key, sessionPrimaryPrefix then the group key,
// whose value is the key's open sessions sorted by start, each with its
// accumulators (appendSessions); the sessions of a key are read and
// written together, as Spark's state manager replaces them together
// (updateSessions), and a row per key needs only Get and Put (the state
// stores have no prefix scan). In append mode, an index row per open
// session, its end then the group key with an empty value, so the sessions
// the watermark closes in keys the batch did not touch are found with one
// EvictBelow, not by a scan of every key (Spark scans). The index keys are
// below the primary keys (a session's end is kept below math.MaxInt64,
// the prefix's value), and both start with eight bytes, so the memory
// provider's tables per bound keep each closing end's index rows together.
// The index rows count as state rows
// (spark-differences.md#state-index-rows).

// sessionSuffix is the length of the session's start and end at the end
// of a map-side partial's key.
const sessionSuffix = 16

// sessionPrimaryPrefix starts every primary state row of a session window:
// the encoding of math.MaxInt64, above every index row.
const sessionPrimaryPrefix = "\xff\xff\xff\xff\xff\xff\xff\xff"

// sessionsFormat versions the encoding of a key's sessions in state.
const sessionsFormat = 1

// AddSession folds one row into the table of a session-window layout with
// the given gap in microseconds (Spark's dynamic gap: an expression per
// row; Add calls it with the layout's constant Gap). A row with a null
// time or a gap <= 0 is skipped and not counted, as Spark's filter on
// session_window drops it; a row whose session [t, t+gap) ends at or
// before wLate is dropped as late when the watermark is on the session
// column, and AddSession returns 1.
func (t *Table) AddSession(r row.Row, gap int64, wLate eventtime.Watermark) (dropped int) {
	l := t.l
	v := r[l.SessionCol]
	if v.Kind == row.Null || gap <= 0 {
		return 0
	}
	end := sessionEnd(v.I, gap)
	if l.SessionLate && eventtime.Late(end, wLate) {
		return 1
	}
	t.key = t.appendGroups(t.key[:0], r)
	t.key = appendInt64(appendInt64(t.key, v.I), end)
	t.fold(r)
	return 0
}

// sessionEnd is start+gap, kept below math.MaxInt64 (the primary rows'
// prefix) should it ever reach it.
func sessionEnd(start, gap int64) int64 {
	if start > math.MaxInt64-1-gap {
		return math.MaxInt64 - 1
	}
	return start + gap
}

// splitSessionKey splits a map-side partial's key into the group key and
// the session's start and end.
func splitSessionKey(k string) (group string, start, end int64, err error) {
	if len(k) < sessionSuffix {
		return "", 0, 0, fmt.Errorf("decode session key: %d bytes, want at least %d", len(k), sessionSuffix)
	}
	n := len(k) - sessionSuffix
	return k[:n], readInt64([]byte(k[n : n+8])), readInt64([]byte(k[n+8:])), nil
}

// mergeSessions sorts one partition's partials by (key, start, end) and
// merges the sessions of a key that overlap or touch, in place (the
// table's accumulators; Partition is called once per table).
func (l *Layout) mergeSessions(entries []Entry) []Entry {
	if len(entries) < 2 {
		return entries
	}
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
	}
	out := make([]Entry, 0, len(entries))
	var lastGroup string
	var lastStart, lastEnd int64
	for _, o := range SortKeys(keys) {
		e := entries[o]
		g, start, end, _ := splitSessionKey(e.Key) // Add wrote every key
		if n := len(out); n > 0 && g == lastGroup && start <= lastEnd {
			last := &out[n-1]
			for i := range l.Measures {
				l.Measures[i].merge(&last.Accs[i], &e.Accs[i])
			}
			if end > lastEnd {
				lastEnd = end
				last.Key = g + string(appendInt64(appendInt64(nil, lastStart), end))
			}
			continue
		}
		out = append(out, e)
		lastGroup, lastStart, lastEnd = g, start, end
	}
	return out
}

// session is one session of a key with its accumulators.
type session struct {
	start, end int64
	accs       []Acc
}

// mergeSorted merges sessions sorted by start into new sessions with
// accumulators of their own (the inputs' are left as they are: a re-run
// of the reduce sees the same partials).
func (l *Layout) mergeSorted(in []session) []session {
	nm := len(l.Measures)
	var out []session
	for _, s := range in {
		n := len(out)
		if n == 0 || s.start > out[n-1].end {
			out = append(out, session{start: s.start, end: s.end, accs: make([]Acc, nm)})
			n++
		}
		c := &out[n-1]
		c.end = max(c.end, s.end)
		for i := range l.Measures {
			l.Measures[i].merge(&c.accs[i], &s.accs[i])
		}
	}
	return out
}

// appendSessions appends the encoding of a key's sessions (sorted by
// start): the format, their count, then per session its start and end
// (8 bytes each, big-endian with the sign flipped) and its accumulators
// (uvarint length, AppendAccs).
func (l *Layout) appendSessions(b []byte, ss []session, scratch []byte) ([]byte, []byte) {
	b = append(b, sessionsFormat)
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendInt64(appendInt64(b, s.start), s.end)
		scratch = l.AppendAccs(scratch[:0], s.accs)
		b = binary.AppendUvarint(b, uint64(len(scratch)))
		b = append(b, scratch...)
	}
	return b, scratch
}

// decodeSessions decodes a key's sessions (appendSessions).
func (l *Layout) decodeSessions(b []byte) ([]session, error) {
	if len(b) == 0 || b[0] != sessionsFormat {
		return nil, fmt.Errorf("decode sessions: unknown format")
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("decode sessions: bad count")
	}
	b = b[k:]
	out := make([]session, n)
	nm := len(l.Measures)
	for i := range out {
		if len(b) < 16 {
			return nil, fmt.Errorf("decode sessions: truncated session %d", i)
		}
		out[i].start, out[i].end = readInt64(b), readInt64(b[8:])
		b = b[16:]
		m, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < m {
			return nil, fmt.Errorf("decode sessions: truncated accumulators of session %d", i)
		}
		out[i].accs = make([]Acc, nm)
		if err := l.DecodeAccs(b[k:k+int(m)], out[i].accs); err != nil {
			return nil, fmt.Errorf("decode sessions: %w", err)
		}
		b = b[k+int(m):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("decode sessions: %d trailing bytes", len(b))
	}
	return out, nil
}

// sessionIndexKey is the index row of a key's session ending at end.
func sessionIndexKey(b []byte, end int64, group string) []byte {
	return append(appendInt64(b, end), group...)
}

// sessionOutKey orders emitted sessions: start, end, then the group key
// (appendKeyValues reads it back).
func sessionOutKey(group string, s session) string {
	return string(append(appendInt64(appendInt64(nil, s.start), s.end), group...))
}

func hasEnd(ss []session, end int64) bool {
	return slices.ContainsFunc(ss, func(s session) bool { return s.end == end })
}

// reduceSessions is Reduce for a session window (see the comment at the
// top of this file).
func (l *Layout) reduceSessions(st State, partials [][]Entry, wm eventtime.Batch) ([]row.Row, ReduceStats, error) {
	var stats ReduceStats
	index := map[string]int{}
	var groups []string
	var fresh [][]session // per key, in map order
	for _, entries := range partials {
		for _, e := range entries {
			g, start, end, err := splitSessionKey(e.Key)
			if err != nil {
				return nil, stats, fmt.Errorf("reduce: %w", err)
			}
			i, ok := index[g]
			if !ok {
				i = len(groups)
				index[g] = i
				groups = append(groups, g)
				fresh = append(fresh, nil)
			}
			fresh[i] = append(fresh[i], session{start: start, end: end, accs: e.Accs})
		}
	}
	evicts := l.Bound == SessionBound
	var upper []byte
	if evicts {
		upper, evicts = l.EvictBound(wm.Evict)
	}
	closed := func(s session) bool { return evicts && eventtime.Evictable(s.end, wm.Evict) }
	out := emitter{l: l}
	var kb, vb, scratch []byte
	// write replaces a key's stored sessions (old) with its open ones,
	// keeping the index in step in append mode.
	write := func(g string, found bool, old, open []session) error {
		if evicts {
			for _, s := range old {
				if !hasEnd(open, s.end) {
					if err := st.Delete(sessionIndexKey(kb[:0], s.end, g)); err != nil {
						return err
					}
				}
			}
			for _, s := range open {
				if !hasEnd(old, s.end) {
					if err := st.Put(sessionIndexKey(kb[:0], s.end, g), nil); err != nil {
						return err
					}
				}
			}
		}
		kb = append(append(kb[:0], sessionPrimaryPrefix...), g...)
		if len(open) == 0 {
			if found {
				return st.Delete(kb)
			}
			return nil
		}
		vb, scratch = l.appendSessions(vb[:0], open, scratch)
		return st.Put(kb, vb)
	}
	read := func(g string) ([]session, bool, error) {
		kb = append(append(kb[:0], sessionPrimaryPrefix...), g...)
		v, found, err := st.Get(kb)
		if err != nil || !found {
			return nil, found, err
		}
		ss, err := l.decodeSessions(v)
		return ss, true, err
	}

	for i, g := range groups {
		old, found, err := read(g)
		if err != nil {
			return nil, stats, fmt.Errorf("reduce: read state: %w", err)
		}
		// Stored sessions first, then the batch's in map order; a stable
		// sort by start keeps that order among equal starts, so merged
		// floating-point sums are the same in a re-run.
		all := append(slices.Clip(old), fresh[i]...)
		slices.SortStableFunc(all, func(a, b session) int { return cmp.Compare(a.start, b.start) })
		var open []session
		for _, s := range l.mergeSorted(all) {
			if closed(s) {
				out.add(sessionOutKey(g, s), s.accs)
				stats.Removed++
				continue
			}
			open = append(open, s)
		}
		if err := write(g, found, old, open); err != nil {
			return nil, stats, fmt.Errorf("reduce: write state: %w", err)
		}
		stats.Updated += int64(len(open))
	}

	if evicts {
		// Keys the batch did not touch: their index rows below the bound
		// are the sessions the watermark closes. (The touched keys' closed
		// index rows are gone already.)
		var keys []string
		seen := map[string]bool{}
		_, err := EvictBelow(st, upper, func(k, _ []byte) error {
			if len(k) < 8 || bytes.HasPrefix(k, []byte(sessionPrimaryPrefix)) {
				return fmt.Errorf("state row %x is not a session index row", k)
			}
			if g := string(k[8:]); !seen[g] {
				seen[g] = true
				keys = append(keys, g)
			}
			return nil
		})
		if err != nil {
			return nil, stats, fmt.Errorf("reduce: evict: %w", err)
		}
		slices.Sort(keys)
		for _, g := range keys {
			old, found, err := read(g)
			if err != nil {
				return nil, stats, fmt.Errorf("reduce: read state: %w", err)
			}
			if !found {
				return nil, stats, fmt.Errorf("reduce: session index names key %x, which has no sessions in state", g)
			}
			var open []session
			for _, s := range old {
				if closed(s) {
					out.add(sessionOutKey(g, s), s.accs)
					stats.Removed++
				} else {
					open = append(open, s)
				}
			}
			// The closed sessions' index rows went with EvictBelow.
			kb = append(append(kb[:0], sessionPrimaryPrefix...), g...)
			if len(open) == 0 {
				err = st.Delete(kb)
			} else {
				vb, scratch = l.appendSessions(vb[:0], open, scratch)
				err = st.Put(kb, vb)
			}
			if err != nil {
				return nil, stats, fmt.Errorf("reduce: write state: %w", err)
			}
		}
	}

	if l.Mode == query.Complete {
		err := st.Scan(func(k, v []byte) error {
			if !bytes.HasPrefix(k, []byte(sessionPrimaryPrefix)) {
				return nil
			}
			ss, err := l.decodeSessions(v)
			if err != nil {
				return err
			}
			g := string(k[len(sessionPrimaryPrefix):])
			for _, s := range ss {
				out.add(sessionOutKey(g, s), s.accs)
			}
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
