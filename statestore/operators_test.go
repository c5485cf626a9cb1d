package statestore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// Two stateful operators of one query (dedup, then an aggregate) share a
// checkpoint: each writes under state/<op>/ and follows its own record in
// commits/N (operator 0 "state", the others "stateOperators"). The batch's
// committed attempt differs per operator here, and each operator's
// abandoned attempt left a delta: every fresh executor of either provider
// loads each operator's committed version.
func TestEachOperatorFollowsItsOwnCommitRecord(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	opts := func(op int) (MemoryOptions, PebbleOptions) {
		return MemoryOptions{Operator: op, SnapshotInterval: 10}, PebbleOptions{Operator: op, SnapshotInterval: 10, DataDir: t.TempDir()}
	}
	newProv := func(kind string, op int) Provider {
		m, p := opts(op)
		if kind == "memory" {
			return NewMemory(cp, m)
		}
		pb, err := NewPebble(cp, p)
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	record := func(batch int64, ops map[int]string) {
		doc := map[string]any{"version": 1, "batchId": batch}
		others := map[string]CommitRecord{}
		for op, attempt := range ops {
			rec := CommitRecord{Format: RecordFormat, Deltas: []ids.PartitionID{0}, Attempts: map[ids.PartitionID]string{0: attempt}}
			if op == 0 {
				doc["state"] = rec
			} else {
				others[fmt.Sprint(op)] = rec
			}
		}
		doc[OperatorsField] = others
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Put(ctx, fmt.Sprintf("commits/%d", batch), data); err != nil {
			t.Fatal(err)
		}
	}
	w0, w1 := newProv("memory", 0), newProv("pebble", 1)
	commitAs(t, w0, 0, 0, model{"agg": "1"}, "x0")
	commitAs(t, w1, 0, 0, model{"dedup": "1"}, "x0")
	record(0, map[int]string{0: "x0", 1: "x0"})
	// Batch 1: operator 0's first attempt is the committed one; operator
	// 1's first attempt is abandoned and its re-run commits.
	commitAs(t, w0, 0, 1, model{"agg": "2"}, "y1")
	commitAs(t, w1, 0, 1, model{"dedup": "stray"}, "y1")
	w1.Close()
	w1 = newProv("memory", 1)
	commitAs(t, w1, 0, 1, model{"dedup": "2"}, "y2")
	record(1, map[int]string{0: "y1", 1: "y2"})
	w0.Close()
	w1.Close()

	for _, kind := range []string{"memory", "pebble"} {
		for op, want := range map[int]model{0: {"agg": "2"}, 1: {"dedup": "2"}} {
			prov := newProv(kind, op)
			st, err := prov.Open(ctx, 0, 2)
			if err != nil {
				t.Fatalf("%s operator %d: %v", kind, op, err)
			}
			checkStore(t, fmt.Sprintf("a fresh %s executor, operator %d", kind, op), st, want)
			st.Abort()
			prov.Close()
		}
	}
}
