package statestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ids"
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
			writeRecord(t, cp, 0, CommitRecord{Deltas: []ids.PartitionID{0}})
			commitModel(t, survivor, 0, 1, model{"a": "2", "b": "9"}) // the abandoned attempt
			if _, err := cp.Get(ctx, "state/0/0/2.delta"); err != nil {
				t.Fatalf("the abandoned attempt left no delta: %v", err)
			}
			writeRecord(t, cp, 1, CommitRecord{Deltas: []ids.PartitionID{}}) // the committed re-run

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
			writeRecord(t, cp, 0, CommitRecord{Deltas: []ids.PartitionID{0}})
			commitModel(t, writer, 0, 1, model{"a": "2"})
			writeRecord(t, cp, 1, CommitRecord{Deltas: []ids.PartitionID{0}})
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

// commitAs commits want as version v+1 of partition p under attempt.
func commitAs(t *testing.T, prov Provider, p ids.PartitionID, v Version, want model, attempt string) {
	t.Helper()
	ctx := context.Background()
	st, err := prov.Open(ctx, p, v)
	if err != nil {
		t.Fatal(err)
	}
	cur := scanAll(t, st)
	for k := range cur {
		if _, ok := want[k]; !ok {
			st.Delete([]byte(k))
		}
	}
	for k, val := range want {
		if old, ok := cur[k]; !ok || old != val {
			st.Put([]byte(k), []byte(val))
		}
	}
	if _, err := st.Commit(ctx, attempt); err != nil {
		t.Fatal(err)
	}
}

func attemptRecord(attempt string) CommitRecord {
	return CommitRecord{Format: RecordFormat, Deltas: []ids.PartitionID{0}, Attempts: map[ids.PartitionID]string{0: attempt}}
}

// Both attempts of batch 1 change partition 0, reading different data: the
// abandoned one on the survivor (which keeps its version in memory or in
// its local database), the committed re-run on another executor. The two
// deltas have different names; every executor, the survivor and a fresh one
// of either provider, loads the committed version, and a cleanup removes
// the abandoned attempt's file only.
func TestBothAttemptsChangeAPartitionEveryExecutorLoadsTheCommittedOne(t *testing.T) {
	for survivorKind := range providers(t, objstore.NewMem()) {
		for rerunKind := range providers(t, objstore.NewMem()) {
			t.Run("survivor="+survivorKind+"/rerun="+rerunKind, func(t *testing.T) {
				ctx := context.Background()
				cp := objstore.NewMem()
				kinds := providers(t, cp)
				survivor := kinds[survivorKind]()
				defer survivor.Close()
				commitAs(t, survivor, 0, 0, model{"a": "1"}, "a0")
				writeRecord(t, cp, 0, attemptRecord("a0"))
				commitAs(t, survivor, 0, 1, model{"a": "2", "b": "9"}, "ab") // the abandoned attempt

				rerun := kinds[rerunKind]()
				commitAs(t, rerun, 0, 1, model{"a": "3"}, "cm") // the committed re-run
				rerun.Close()
				writeRecord(t, cp, 1, attemptRecord("cm"))
				for _, key := range []string{"state/0/0/2-ab.delta", "state/0/0/2-cm.delta"} {
					if _, err := cp.Get(ctx, key); err != nil {
						t.Fatalf("%s: %v", key, err)
					}
				}

				want := model{"a": "3"}
				st, err := survivor.Open(ctx, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				checkStore(t, "the executor that kept the abandoned attempt's version", st, want)
				// It goes on from the committed version.
				for k, v := range map[string]string{"c": "4"} {
					st.Put([]byte(k), []byte(v))
				}
				if _, err := st.Commit(ctx, "n2"); err != nil {
					t.Fatal(err)
				}
				writeRecord(t, cp, 2, attemptRecord("n2"))
				for fresh, newProv := range kinds {
					prov := newProv()
					for v, want := range map[Version]model{2: {"a": "3"}, 3: {"a": "3", "c": "4"}} {
						st, err := prov.Open(ctx, 0, v)
						if err != nil {
							t.Fatal(err)
						}
						checkStore(t, fmt.Sprintf("a fresh %s executor at version %d", fresh, v), st, want)
						st.Abort()
					}
					prov.Close()
				}

				if _, err := survivor.Cleanup(ctx, 0, 2); err != nil {
					t.Fatal(err)
				}
				keys, err := cp.List(ctx, "state/0/0/")
				if err != nil {
					t.Fatal(err)
				}
				if got, want := strings.Join(keys, " "), "state/0/0/1-a0.delta state/0/0/2-cm.delta state/0/0/3-n2.delta"; got != want {
					t.Errorf("after cleanup: %s, want %s (the abandoned attempt's file removed, every recorded one kept)", got, want)
				}
			})
		}
	}
}

// A recorded attempt's delta deleted from the checkpoint: loading fails
// naming the object, even though another attempt's file for the version is
// there.
func TestADeletedRecordedAttemptFileFailsNamingIt(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	for name, newProv := range providers(t, cp) {
		w := NewMemory(cp, MemoryOptions{SnapshotInterval: 10})
		commitAs(t, w, 0, 0, model{"a": "1"}, "a0")
		commitAs(t, NewMemory(cp, MemoryOptions{SnapshotInterval: 10}), 0, 0, model{"a": "2"}, "b0")
		writeRecord(t, cp, 0, attemptRecord("b0"))
		if err := cp.Delete(ctx, "state/0/0/1-b0.delta"); err != nil {
			t.Fatal(err)
		}
		prov := newProv()
		_, err := prov.Open(ctx, 0, 1)
		prov.Close()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "state/0/0/1-b0.delta") {
			t.Errorf("%s: loading version 1 without its recorded file: %v, want ErrCorrupt naming state/0/0/1-b0.delta", name, err)
		}
		if err := cp.Delete(ctx, "commits/0"); err != nil {
			t.Fatal(err)
		}
		_ = cp.Delete(ctx, "state/0/0/1-a0.delta")
	}
}

// Files of two attempts for one version and no record to choose: an
// error, never a guess.
func TestTwoAttemptsWithoutARecordAreAnError(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	commitAs(t, NewMemory(cp, MemoryOptions{}), 0, 0, model{"a": "1"}, "a0")
	commitAs(t, NewMemory(cp, MemoryOptions{}), 0, 0, model{"a": "2"}, "b0")
	for name, newProv := range providers(t, cp) {
		prov := newProv()
		_, err := prov.Open(ctx, 0, 1)
		prov.Close()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "several attempts") {
			t.Errorf("%s: %v, want ErrCorrupt about several attempts", name, err)
		}
	}
}

// A checkpoint written before file names carried the attempt (format 1:
// <v>.delta, records without attempts) goes on with format 2 names: every
// provider loads across both.
func TestFormat1NamesStillLoad(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	old := NewMemory(cp, MemoryOptions{SnapshotInterval: 2})
	commitAs(t, old, 0, 0, model{"a": "1"}, "")
	writeRecord(t, cp, 0, CommitRecord{Deltas: []ids.PartitionID{0}})
	commitAs(t, old, 0, 1, model{"a": "1", "b": "2"}, "")
	// A format 1 record lists the snapshot (written with the delta then;
	// here by the background maintenance, under the same name).
	writeRecord(t, cp, 1, CommitRecord{Deltas: []ids.PartitionID{0}, Snapshots: []ids.PartitionID{0}})
	if n := maintain(t, old); n != 1 {
		t.Fatalf("maintenance wrote %d snapshots, want 1", n)
	}
	old.Close()
	for name, newProv := range providers(t, cp) {
		prov := newProv()
		commitAs(t, prov, 0, 2, model{"a": "1", "b": "3"}, "n"+name)
		writeRecord(t, cp, 2, attemptRecord("n"+name))
		prov.Close()
		for fresh, newProv := range providers(t, cp) {
			prov := newProv()
			st, err := prov.Open(ctx, 0, 3)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "a fresh "+fresh+" executor after "+name, st, model{"a": "1", "b": "3"})
			st.Abort()
			prov.Close()
		}
		if _, err := cp.Get(ctx, "state/0/0/2.snapshot"); err != nil {
			t.Fatalf("format 1 snapshot: %v", err)
		}
	}
}

// Files of two attempts for a version below the recorded snapshot a load
// starts from (their record removed with the log) are never read, so they
// are no error.
func TestTwoAttemptsBelowTheBaseSnapshotAreNoError(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	commitAs(t, NewMemory(cp, MemoryOptions{SnapshotInterval: 2}), 0, 0, model{"a": "1"}, "a0")
	w := NewMemory(cp, MemoryOptions{SnapshotInterval: 2})
	commitAs(t, w, 0, 0, model{"a": "2"}, "b0")
	commitAs(t, w, 0, 1, model{"a": "2", "b": "3"}, "b1") // 2-b1.delta
	writeRecord(t, cp, 1, CommitRecord{Format: RecordFormat, Deltas: []ids.PartitionID{0}, Attempts: map[ids.PartitionID]string{0: "b1"}})
	if n := maintain(t, w); n != 1 { // 2-b1.snapshot, named for the recorded delta
		t.Fatalf("maintenance wrote %d snapshots, want 1", n)
	}
	for name, newProv := range providers(t, cp) {
		prov := newProv()
		st, err := prov.Open(ctx, 0, 2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkStore(t, name, st, model{"a": "2", "b": "3"})
		st.Abort()
		prov.Close()
	}
}
