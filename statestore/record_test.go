package statestore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// providers builds each provider kind on one checkpoint, each with its own
// local state (one executor each).
func providers(t *testing.T, cp objstore.Store) map[string]func() Provider {
	return map[string]func() Provider{
		"memory": func() Provider { return NewMemory(cp, MemoryOptions{SnapshotInterval: 10}) },
		"pebble": func() Provider { return newTestPebble(t, cp, 10) },
	}
}

// A batch's first attempt changed partition 0 and wrote its delta, then
// was abandoned; the committed re-run left the partition unchanged (it
// read other data), so commits/1 lists no delta. Every executor, the one
// that ran the abandoned attempt and kept its result as well as a fresh one
// of either provider, loads the committed version, never the stray delta.
func TestAStrayDeltaOfAnAbandonedAttemptIsNeverLoaded(t *testing.T) {
	for name := range providers(t, objstore.NewMem()) {
		t.Run("survivor="+name, func(t *testing.T) {
			ctx := context.Background()
			cp := objstore.NewMem()
			kinds := providers(t, cp)
			survivor := kinds[name]()
			defer survivor.Close()
			commitModel(t, survivor, 0, 0, model{"a": "1"})
			writeRecord(t, cp, 0, CommitRecord{Deltas: []int{0}})
			commitModel(t, survivor, 0, 1, model{"a": "2", "b": "9"}) // the abandoned attempt
			if _, err := cp.Get(ctx, "state/0/0/2.delta"); err != nil {
				t.Fatalf("the abandoned attempt left no delta: %v", err)
			}
			writeRecord(t, cp, 1, CommitRecord{Deltas: []int{}}) // the committed re-run

			want := model{"a": "1"}
			st, err := survivor.Open(ctx, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "the executor that ran the abandoned attempt", st, want)
			st.Abort()
			for fresh, newProv := range kinds {
				prov := newProv()
				st, err := prov.Open(ctx, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				checkStore(t, "a fresh "+fresh+" executor", st, want)
				st.Abort()
				prov.Close()
			}
		})
	}
}

// A delta the commit record lists, deleted from the checkpoint: loading
// fails with an error naming the object, never as "unchanged".
func TestADeletedDeltaUnderACommittedVersionFailsNamingIt(t *testing.T) {
	for name := range providers(t, objstore.NewMem()) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cp := objstore.NewMem()
			kinds := providers(t, cp)
			writer := kinds[name]()
			defer writer.Close()
			commitModel(t, writer, 0, 0, model{"a": "1"})
			writeRecord(t, cp, 0, CommitRecord{Deltas: []int{0}})
			commitModel(t, writer, 0, 1, model{"a": "2"})
			writeRecord(t, cp, 1, CommitRecord{Deltas: []int{0}})
			if err := cp.Delete(ctx, "state/0/0/1.delta"); err != nil {
				t.Fatal(err)
			}
			for reader, newProv := range kinds {
				prov := newProv()
				_, err := prov.Open(ctx, 0, 2)
				prov.Close()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "state/0/0/1.delta") || !strings.Contains(err.Error(), "commits/0") {
					t.Errorf("%s loading version 2 without its listed delta 1: %v, want ErrCorrupt naming state/0/0/1.delta and commits/0", reader, err)
				}
			}
		})
	}
}
