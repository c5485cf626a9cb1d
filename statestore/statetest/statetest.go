// Package statetest runs a stateful operator's reduce over the real state
// providers (memory and pebble, on an in-memory checkpoint) the way a
// query's batches use them, for the logic tests of the operators (agg's
// windows and sessions, dedup): batch N opens every partition at version N
// and commits version N+1 under an attempt; the driver's commit record
// (commits/N, under the operator's field) names the partitions each
// attempt changed; maintenance
// writes snapshots as an executor does in the background; a restart is a
// new provider over the same checkpoint (a new local directory for
// pebble); and a re-run of batch N is a second attempt from version N
// whose record replaces the first's, as when the first attempt's commit
// never happened.
//
// It is for tests only: every error of the providers fails the test.
package statetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/statestore"
)

// Providers names the providers a test runs on.
var Providers = []string{"memory", "pebble"}

// Options configures a Harness.
type Options struct {
	// Partitions is the number of state partitions (default 2).
	Partitions int
	// Operator is the operator id (the <op> in file names).
	Operator int
	// BoundPrefix is statestore.MemoryOptions.BoundPrefix.
	BoundPrefix bool
	// SnapshotInterval is the providers' (default 3, so snapshots are
	// taken and loaded within a few batches).
	SnapshotInterval int
}

// Harness is one operator's state across batches, restarts and re-runs.
type Harness struct {
	t    testing.TB
	kind string
	opts Options
	cp   objstore.Store
	prov statestore.Provider
}

// New returns a harness on provider kind ("memory" or "pebble") with an
// empty checkpoint, closed at the end of the test.
func New(t testing.TB, kind string, opts Options) *Harness {
	t.Helper()
	if opts.Partitions <= 0 {
		opts.Partitions = 2
	}
	if opts.SnapshotInterval <= 0 {
		opts.SnapshotInterval = 3
	}
	h := &Harness{t: t, kind: kind, opts: opts, cp: objstore.NewMem()}
	h.open()
	t.Cleanup(func() { h.prov.Close() })
	return h
}

func (h *Harness) open() {
	h.t.Helper()
	switch h.kind {
	case "memory":
		h.prov = statestore.NewMemory(h.cp, statestore.MemoryOptions{Operator: h.opts.Operator, SnapshotInterval: h.opts.SnapshotInterval, BoundPrefix: h.opts.BoundPrefix})
	case "pebble":
		pb, err := statestore.NewPebble(h.cp, statestore.PebbleOptions{Operator: h.opts.Operator, SnapshotInterval: h.opts.SnapshotInterval, DataDir: h.t.TempDir()})
		if err != nil {
			h.t.Fatal(err)
		}
		h.prov = pb
	default:
		h.t.Fatalf("statetest: unknown provider %q", h.kind)
	}
}

// Partitions is the number of state partitions.
func (h *Harness) Partitions() int { return h.opts.Partitions }

// Restart closes the provider and opens a new one over the same
// checkpoint: the next batch loads every partition from its files.
func (h *Harness) Restart() {
	h.t.Helper()
	if err := h.prov.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

// Batch runs batch id under attempt: for each partition, it opens version
// id, calls fn, and commits version id+1; then it writes commits/id
// naming the partitions that wrote a delta under this attempt (replacing
// a record an earlier attempt of the batch wrote), and runs a maintenance
// pass. An error from fn aborts the batch and is returned.
func (h *Harness) Batch(id int64, attempt string, fn func(p ids.PartitionID, st statestore.Store) error) error {
	h.t.Helper()
	ctx := context.Background()
	rec := statestore.CommitRecord{Format: statestore.RecordFormat, Deltas: []ids.PartitionID{}, Attempts: map[ids.PartitionID]string{}}
	for p := range ids.PartitionID(h.opts.Partitions) {
		st, err := h.prov.Open(ctx, p, statestore.Version(id))
		if err != nil {
			h.t.Fatalf("batch %d: open partition %d: %v", id, p, err)
		}
		if err := fn(p, st); err != nil {
			st.Abort()
			return fmt.Errorf("batch %d partition %d: %w", id, p, err)
		}
		writes, err := st.Commit(ctx, attempt)
		if err != nil {
			h.t.Fatalf("batch %d: commit partition %d: %v", id, p, err)
		}
		if writes > 0 {
			rec.Deltas = append(rec.Deltas, p)
			rec.Attempts[p] = attempt
		}
	}
	doc := map[string]any{"version": 1, "batchId": id, "state": rec}
	if h.opts.Operator != 0 {
		doc = map[string]any{"version": 1, "batchId": id, statestore.OperatorsField: map[string]any{fmt.Sprint(h.opts.Operator): rec}}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.cp.Put(ctx, fmt.Sprintf("commits/%d", id), data); err != nil {
		h.t.Fatal(err)
	}
	if m, ok := h.prov.(statestore.Maintainer); ok {
		if _, err := m.Maintain(ctx); err != nil {
			h.t.Fatalf("batch %d: maintenance: %v", id, err)
		}
	}
	return nil
}

// State returns every row of every partition at version v (opened, read
// and aborted), by partition.
func (h *Harness) State(v int64) []map[string]string {
	h.t.Helper()
	ctx := context.Background()
	out := make([]map[string]string, h.opts.Partitions)
	for p := range ids.PartitionID(h.opts.Partitions) {
		st, err := h.prov.Open(ctx, p, statestore.Version(v))
		if err != nil {
			h.t.Fatalf("state version %d: open partition %d: %v", v, p, err)
		}
		m := map[string]string{}
		err = st.Scan(func(k, val []byte) error {
			if _, dup := m[string(k)]; dup {
				return fmt.Errorf("key %x scanned twice", k)
			}
			m[string(k)] = string(val)
			return nil
		})
		st.Abort()
		if err != nil {
			h.t.Fatalf("state version %d partition %d: %v", v, p, err)
		}
		out[p] = m
	}
	return out
}

// Rows counts the rows of a State.
func Rows(state []map[string]string) int {
	n := 0
	for _, m := range state {
		n += len(m)
	}
	return n
}

// Equal reports whether two States hold the same rows, and the first key
// that differs.
func Equal(a, b []map[string]string) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d partitions against %d", len(a), len(b))
	}
	for p := range a {
		keys := slices.Sorted(maps.Keys(a[p]))
		for _, k := range slices.Sorted(maps.Keys(b[p])) {
			if _, ok := a[p][k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			va, oka := a[p][k]
			vb, okb := b[p][k]
			if oka != okb || va != vb {
				return false, fmt.Sprintf("partition %d key %x: %q (%v) against %q (%v)", p, k, va, oka, vb, okb)
			}
		}
	}
	return true, ""
}
