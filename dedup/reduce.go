package dedup

import (
	"bytes"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

// primaryPrefix starts every primary state row: the bound encoding of
// math.MaxInt64, above every expiry row.
const primaryPrefix = "\xff\xff\xff\xff\xff\xff\xff\xff"

// valueFormat versions a primary row's value.
const valueFormat = 1

// Stats reports what a reduce did.
type Stats struct {
	// Updated counts the keys stored (numUpdatedStateRows).
	Updated int64
	// Removed counts the keys the watermark evicted (numRemovedStateRows).
	Removed int64
	// Duplicates counts the rows dropped because their key was in state
	// or seen earlier in the batch (numDroppedDuplicateRows).
	Duplicates int64
	// Late counts rows dropped as late here (the map side drops them
	// first, so this is 0 behind a Table).
	Late int64
}

// EvictBound returns the key below which every expiry row has
// expiresAt <= w.
func EvictBound(w eventtime.Watermark) []byte {
	if int64(w) >= math.MaxInt64-1 {
		return []byte(primaryPrefix)
	}
	return agg.AppendBound(nil, int64(w)+1)
}

// Reduce runs one state partition's batch: rows[m] are the rows map task
// m put in this partition, in map order and each in read order (see the
// package comment). It returns the kept rows in that order, after
// storing their keys and evicting every key with wm.Evict >= expiresAt
// (after the rows: a key due to leave still drops its duplicates in this
// batch, as Spark evicts after processing). Rows at or before wm.Late are
// dropped as late (a Table has dropped them already).
func (l *Layout) Reduce(st agg.State, rows [][]row.Row, wm eventtime.Batch) ([]row.Row, Stats, error) {
	var stats Stats
	var out []row.Row
	seen := map[string]struct{}{}
	var key, kb, vb []byte
	for _, rs := range rows {
		for _, r := range rs {
			if l.Late(r, wm.Late) {
				stats.Late++
				continue
			}
			key = l.AppendKey(key[:0], r)
			if _, dup := seen[string(key)]; dup {
				stats.Duplicates++
				continue
			}
			seen[string(key)] = struct{}{}
			kb = append(append(kb[:0], primaryPrefix...), key...)
			_, found, err := st.Get(kb)
			if err != nil {
				return nil, stats, fmt.Errorf("dedup: read state: %w", err)
			}
			if found {
				stats.Duplicates++
				continue
			}
			exp := l.expiresAt(r)
			vb = agg.AppendBound(append(vb[:0], valueFormat), exp)
			if err := st.Put(kb, vb); err != nil {
				return nil, stats, fmt.Errorf("dedup: write state: %w", err)
			}
			kb = append(agg.AppendBound(kb[:0], exp), key...)
			if err := st.Put(kb, nil); err != nil {
				return nil, stats, fmt.Errorf("dedup: write state: %w", err)
			}
			stats.Updated++
			out = append(out, r)
		}
	}
	n, err := l.evict(st, wm.Evict)
	if err != nil {
		return nil, stats, err
	}
	stats.Removed = n
	return out, stats, nil
}

// evict removes every key with expiresAt <= w: its expiry rows with one
// EvictBelow, then the primary row each names.
func (l *Layout) evict(st agg.State, w eventtime.Watermark) (int64, error) {
	var keys [][]byte
	_, err := agg.EvictBelow(st, EvictBound(w), func(k, _ []byte) error {
		if len(k) < 8 || bytes.HasPrefix(k, []byte(primaryPrefix)) {
			return fmt.Errorf("state row %x is not an expiry row", k)
		}
		keys = append(keys, append([]byte(primaryPrefix), k[8:]...))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dedup: evict: %w", err)
	}
	for _, k := range keys {
		if err := st.Delete(k); err != nil {
			return 0, fmt.Errorf("dedup: evict: %w", err)
		}
	}
	return int64(len(keys)), nil
}

// ExpiresAt decodes a primary row's value (for tests and tools).
func ExpiresAt(value []byte) (int64, error) {
	if len(value) != 9 || value[0] != valueFormat {
		return 0, fmt.Errorf("dedup: bad state value %x", value)
	}
	return agg.ReadBound(value[1:]), nil
}
