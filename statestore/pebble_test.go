package statestore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// newTestPebble returns a pebble provider on cp with a fresh DataDir,
// closed at the end of the test.
func newTestPebble(t *testing.T, cp objstore.Store, interval int) *Pebble {
	t.Helper()
	pb, err := NewPebble(cp, PebbleOptions{SnapshotInterval: interval, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	return pb
}

// model is the oracle: a partition's rows as a plain map.
type model map[string]string

// scanAll returns a store's rows, failing the test if a key repeats.
func scanAll(t *testing.T, st Store) model {
	t.Helper()
	got := model{}
	err := st.Scan(func(k, v []byte) error {
		if _, dup := got[string(k)]; dup {
			return fmt.Errorf("key %q scanned twice", k)
		}
		got[string(k)] = string(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// scanKeys returns the keys in scan order.
func scanKeys(t *testing.T, st Store) []string {
	t.Helper()
	var keys []string
	if err := st.Scan(func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func diffModels(want, got model) string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("missing %q", k))
		} else if g != v {
			out = append(out, fmt.Sprintf("%q = %q, want %q", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("unexpected %q", k))
		}
	}
	sort.Strings(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("... %d differences", len(out)))
	}
	return strings.Join(out, "; ")
}

// checkStore asserts that st holds exactly want.
func checkStore(t *testing.T, what string, st Store, want model) {
	t.Helper()
	got := scanAll(t, st)
	if d := diffModels(want, got); d != "" {
		t.Fatalf("%s: scan differs from oracle: %s", what, d)
	}
	if st.NumRows() != int64(len(want)) {
		t.Fatalf("%s: NumRows = %d, want %d", what, st.NumRows(), len(want))
	}
}

// randomBatch applies the same random gets, puts and deletes to every
// store and to m, checking each Get against m.
func randomBatch(t *testing.T, rng *rand.Rand, keys int, stores []Store, m model) {
	t.Helper()
	n := rng.IntN(40)
	for range n {
		k := fmt.Sprintf("k%04d", rng.IntN(keys))
		switch r := rng.IntN(10); {
		case r < 3:
			want, wantOK := m[k]
			for i, st := range stores {
				v, ok, err := st.Get([]byte(k))
				if err != nil {
					t.Fatal(err)
				}
				if ok != wantOK || string(v) != want {
					t.Fatalf("store %d: Get(%q) = %q, %v; want %q, %v", i, k, v, ok, want, wantOK)
				}
			}
		case r < 7:
			v := fmt.Sprintf("v%d", rng.IntN(1000))
			if rng.IntN(20) == 0 {
				v = ""
			}
			for _, st := range stores {
				if err := st.Put([]byte(k), []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			m[k] = v
		default:
			for _, st := range stores {
				if err := st.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			delete(m, k)
		}
	}
}

func listAll(t *testing.T, st objstore.Store, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	keys, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, k := range keys {
		if out[k], err = st.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestPebbleMatchesMemoryOnRandomBatches(t *testing.T) {
	ctx := context.Background()
	cpMem, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cpPeb, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mem := NewMemory(cpMem, MemoryOptions{SnapshotInterval: 7})
	peb := newTestPebble(t, cpPeb, 7)
	rng := rand.New(rand.NewPCG(1, 2))
	const parts = 2
	// history[p][v] is the oracle for partition p at version v.
	history := make([][]model, parts)
	for p := range history {
		history[p] = []model{{}}
	}
	for step := range shortOr(300, 80) {
		p := ids.PartitionID(rng.IntN(parts))
		v := Version(len(history[p]) - 1)
		open := func(prov Provider, name string, at Version) Store {
			st, err := prov.Open(ctx, p, at)
			if err != nil {
				t.Fatalf("step %d: %s: open partition %d version %d: %v", step, name, p, at, err)
			}
			return st
		}
		if rng.IntN(8) == 0 && v > 0 {
			// Read an older version, as a re-run batch would.
			old := Version(rng.IntN(int(v)))
			for _, prov := range []struct {
				name string
				p    Provider
			}{{"memory", mem}, {"pebble", peb}} {
				st := open(prov.p, prov.name, old)
				checkStore(t, fmt.Sprintf("step %d: %s partition %d version %d", step, prov.name, p, old), st, history[p][old])
				st.Abort()
			}
		}
		ms, ps := open(mem, "memory", v), open(peb, "pebble", v)
		m := maps.Clone(history[p][v])
		randomBatch(t, rng, 60, []Store{ms, ps}, m)
		// Mid-batch, both see the batch's changes.
		checkStore(t, fmt.Sprintf("step %d: memory mid-batch", step), ms, m)
		checkStore(t, fmt.Sprintf("step %d: pebble mid-batch", step), ps, m)
		if keys := scanKeys(t, ps); !sort.StringsAreSorted(keys) {
			t.Fatalf("step %d: pebble scan not in key order: %q", step, keys)
		}
		if rng.IntN(6) == 0 {
			ms.Abort()
			ps.Abort()
			continue
		}
		mw, err := ms.Commit(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		pw, err := ps.Commit(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if mw != pw {
			t.Fatalf("step %d: memory wrote %d objects, pebble %d", step, mw, pw)
		}
		history[p] = append(history[p], m)
	}
	// Every version of every partition, through the warm path for the
	// newest and a rebuild for the others.
	for p := range ids.PartitionID(parts) {
		for v, want := range history[p] {
			st, err := peb.Open(ctx, p, Version(v))
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, fmt.Sprintf("pebble partition %d version %d", p, v), st, want)
			st.Abort()
		}
	}
	// Same inputs, same files, byte for byte.
	memFiles, pebFiles := listAll(t, cpMem, "state/"), listAll(t, cpPeb, "state/")
	if len(memFiles) == 0 || len(memFiles) != len(pebFiles) {
		t.Fatalf("memory wrote %d files, pebble %d", len(memFiles), len(pebFiles))
	}
	for k, b := range memFiles {
		if !bytes.Equal(b, pebFiles[k]) {
			t.Fatalf("file %s differs between providers", k)
		}
	}
}

func TestPebbleAbortDiscardsChanges(t *testing.T) {
	ctx := context.Background()
	cp, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pb := newTestPebble(t, cp, 10)
	st, err := pb.Open(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Put([]byte("a"), []byte("1"))
	st.Put([]byte("b"), []byte("2"))
	if _, err := st.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
	st, err = pb.Open(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	st.Put([]byte("a"), []byte("changed"))
	st.Delete([]byte("b"))
	st.Put([]byte("c"), []byte("3"))
	st.Abort()
	if err := st.Put([]byte("d"), []byte("4")); err == nil {
		t.Fatal("Put after Abort succeeded")
	}
	if _, err := st.Commit(ctx, ""); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	st, err = pb.Open(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "after abort", st, model{"a": "1", "b": "2"})
	st.Abort()
	if keys, _ := cp.List(ctx, "state/"); len(keys) != 1 {
		t.Fatalf("checkpoint holds %q, want only version 1's delta", keys)
	}
}

func TestPebbleOpenSamePartitionTwiceFails(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	pb := newTestPebble(t, cp, 10)
	st, err := pb.Open(ctx, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.Open(ctx, 3, 0); err == nil {
		t.Fatal("second Open of an open partition succeeded")
	}
	other, err := pb.Open(ctx, 4, 0)
	if err != nil {
		t.Fatalf("open another partition: %v", err)
	}
	other.Abort()
	st.Abort()
	if st, err = pb.Open(ctx, 3, 0); err != nil {
		t.Fatalf("open after abort: %v", err)
	}
	st.Abort()
}

func TestPebbleCloseIsIdempotentAndStopsItsGoroutines(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	before := runtime.NumGoroutine()
	pb, err := NewPebble(cp, PebbleOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for p := range ids.PartitionID(4) {
		st, err := pb.Open(ctx, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		st.Put([]byte("k"), []byte("v"))
		if _, err := st.Commit(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := pb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := pb.Open(ctx, 0, 1); err == nil {
		t.Fatal("Open after Close succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
	}
}

func TestNewPebbleRejectsBadOptions(t *testing.T) {
	cp, _ := objstore.NewFS(t.TempDir())
	if _, err := NewPebble(cp, PebbleOptions{}); err == nil || !strings.Contains(err.Error(), "DataDir") {
		t.Fatalf("empty DataDir: err = %v", err)
	}
	if _, err := NewPebble(cp, PebbleOptions{DataDir: t.TempDir(), SnapshotInterval: -1}); err == nil || !strings.Contains(err.Error(), "SnapshotInterval") {
		t.Fatalf("negative SnapshotInterval: err = %v", err)
	}
}

// commitModel opens p at v on prov, makes it equal want, and commits.
func commitModel(t *testing.T, prov Provider, p ids.PartitionID, v Version, want model) {
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
	if _, err := st.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// randomHistory returns n+1 versions (0 empty) of a small random state.
func randomHistory(seed uint64, n int) []model {
	rng := rand.New(rand.NewPCG(seed, seed))
	h := []model{{}}
	for range n {
		m := maps.Clone(h[len(h)-1])
		for range 1 + rng.IntN(6) {
			k := fmt.Sprintf("g%03d", rng.IntN(40))
			if rng.IntN(3) == 0 {
				delete(m, k)
			} else {
				m[k] = fmt.Sprintf("%d", rng.IntN(100))
			}
		}
		h = append(h, m)
	}
	return h
}

func TestPebbleLoadsOlderVersionAfterNewerCommitted(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	pb := newTestPebble(t, cp, 4)
	h := randomHistory(7, 12)
	for v := 0; v < len(h)-1; v++ {
		commitModel(t, pb, 0, Version(v), h[v+1])
	}
	n := Version(len(h) - 2)
	for _, v := range []Version{n + 1, n, n + 1, 3, n - 1} {
		st, err := pb.Open(ctx, 0, v)
		if err != nil {
			t.Fatal(err)
		}
		checkStore(t, fmt.Sprintf("version %d", v), st, h[v])
		st.Abort()
	}
	// A fresh executor, too.
	fresh := newTestPebble(t, cp, 4)
	st, err := fresh.Open(ctx, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, fmt.Sprintf("fresh executor version %d", n), st, h[n])
	st.Abort()
}

func TestPebbleStaleLocalDatabaseCatchesUpOrRebuilds(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	h := randomHistory(11, 30)
	a := newTestPebble(t, cp, 10)
	b := newTestPebble(t, cp, 10)
	for v := 0; v < 5; v++ {
		commitModel(t, a, 0, Version(v), h[v+1])
	}
	// Another executor takes over and commits versions 6..8; a's database
	// still holds 5 and catches up from the deltas.
	for v := 5; v < 8; v++ {
		commitModel(t, b, 0, Version(v), h[v+1])
	}
	st, err := a.Open(ctx, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "caught up to version 8", st, h[8])
	st.Abort()
	// Now b goes past a snapshot and the deltas before it are cleaned up:
	// a must rebuild from the snapshot.
	for v := 8; v < 25; v++ {
		commitModel(t, b, 0, Version(v), h[v+1])
		recordAndMaintain(t, cp, b, 0, Version(v))
	}
	if _, err := b.Cleanup(ctx, 0, 20); err != nil {
		t.Fatal(err)
	}
	if keys, _ := cp.List(ctx, deltaKey(0, 0, 9, "")); len(keys) != 0 {
		t.Fatalf("cleanup kept %q", keys)
	}
	st, err = a.Open(ctx, 0, 25)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "rebuilt at version 25", st, h[25])
	st.Abort()
}

func TestPebbleAndMemoryLoadEachOthersCheckpoints(t *testing.T) {
	ctx := context.Background()
	h := randomHistory(3, 25)
	for _, tc := range []struct {
		name   string
		writer func(objstore.Store) Provider
		reader func(objstore.Store) Provider
	}{
		{"memory to pebble",
			func(cp objstore.Store) Provider { return NewMemory(cp, MemoryOptions{SnapshotInterval: 6}) },
			func(cp objstore.Store) Provider { return newTestPebble(t, cp, 6) }},
		{"pebble to memory",
			func(cp objstore.Store) Provider { return newTestPebble(t, cp, 6) },
			func(cp objstore.Store) Provider { return NewMemory(cp, MemoryOptions{SnapshotInterval: 6}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, _ := objstore.NewFS(t.TempDir())
			w := tc.writer(cp)
			for v := 0; v < len(h)-1; v++ {
				commitModel(t, w, 1, Version(v), h[v+1])
			}
			for v := len(h) - 1; v >= 0; v-- {
				r := tc.reader(cp)
				st, err := r.Open(ctx, 1, Version(v))
				if err != nil {
					t.Fatal(err)
				}
				checkStore(t, fmt.Sprintf("version %d", v), st, h[v])
				st.Abort()
				r.Close()
			}
		})
	}
}

func TestPebbleCleanupKeepsStorageBoundedOver1000Batches(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	pb := newTestPebble(t, cp, 10)
	rng := rand.New(rand.NewPCG(5, 5))
	h := []model{{}}
	const retain = 100
	maxObjects := 0
	var keep Version
	// -short (the fast loop) runs 300 batches: cleanup still runs 30 times
	// with 100 retained.
	batches := Version(shortOr(1000, 300))
	for v := Version(0); v < batches; v++ {
		st, err := pb.Open(ctx, 0, v)
		if err != nil {
			t.Fatal(err)
		}
		m := maps.Clone(h[v])
		randomBatch(t, rng, 200, []Store{st}, m)
		if _, err := st.Commit(ctx, ""); err != nil {
			t.Fatal(err)
		}
		recordAndMaintain(t, cp, pb, 0, v)
		h = append(h, m)
		next := v + 1
		if next%10 != 0 {
			continue
		}
		keep = max(next-retain+1, 0)
		if _, err := pb.Cleanup(ctx, 0, keep); err != nil {
			t.Fatal(err)
		}
		keys, err := cp.List(ctx, "state/")
		if err != nil {
			t.Fatal(err)
		}
		maxObjects = max(maxObjects, len(keys))
		// retain deltas, the ones since the snapshot below keep, and a
		// snapshot per 10 versions.
		if bound := retain + 10 + retain/10 + 1; len(keys) > bound {
			t.Fatalf("after version %d and cleanup to %d: %d objects under state/, want <= %d", next, keep, len(keys), bound)
		}
		// Spot-check the oldest kept version on a fresh executor.
		if next%100 == 0 {
			fresh := newTestPebble(t, cp, 10)
			st, err := fresh.Open(ctx, 0, keep)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, fmt.Sprintf("version %d after cleanup to %d", keep, keep), st, h[keep])
			st.Abort()
			fresh.Close()
		}
	}
	t.Logf("at most %d objects under state/ over %d batches", maxObjects, batches)
	// Every version >= keep is still loadable.
	fresh := newTestPebble(t, cp, 10)
	for v := keep; v <= batches; v++ {
		st, err := fresh.Open(ctx, 0, v)
		if err != nil {
			t.Fatal(err)
		}
		checkStore(t, fmt.Sprintf("version %d after cleanup to %d", v, keep), st, h[v])
		st.Abort()
	}
}

func TestPebbleRestartAfterCrashHasLastCommittedVersion(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	h := randomHistory(9, 8)
	dataDir := t.TempDir()
	pb, err := NewPebble(cp, PebbleOptions{SnapshotInterval: 3, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v < len(h)-1; v++ {
		commitModel(t, pb, 0, Version(v), h[v+1])
	}
	last := Version(len(h) - 1)
	// The crash: a batch is under way and never commits.
	st, err := pb.Open(ctx, 0, last)
	if err != nil {
		t.Fatal(err)
	}
	st.Put([]byte("uncommitted"), []byte("x"))
	st.Delete([]byte(firstKey(h[last])))
	pb.Close()

	// A new executor on an empty DataDir.
	other := newTestPebble(t, cp, 3)
	st, err = other.Open(ctx, 0, last)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "fresh executor after crash", st, h[last])
	st.Abort()

	// The same executor restarted on its DataDir: the warm database.
	again, err := NewPebble(cp, PebbleOptions{SnapshotInterval: 3, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	st, err = again.Open(ctx, 0, last)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "restart on the same DataDir", st, h[last])
	st.Abort()
}

func firstKey(m model) string {
	keys := sort.StringSlice(nil)
	for k := range m {
		keys = append(keys, k)
	}
	keys.Sort()
	if len(keys) == 0 {
		return "none"
	}
	return keys[0]
}

// millionKey is the key of group i in the million-group test.
func millionKey(i int) []byte { return fmt.Appendf(nil, "course-%06d|2024-01-01T00:%02d", i/60, i%60) }

func TestPebbleLoadsMillionGroupPartitionOnFreshExecutor(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million keys")
	}
	ctx := context.Background()
	const groups = 1_000_000
	const batches = 4
	cpPeb, _ := objstore.NewFS(t.TempDir())
	cpMem, _ := objstore.NewFS(t.TempDir())
	writer, err := NewPebble(cpPeb, PebbleOptions{SnapshotInterval: batches, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mem := NewMemory(cpMem, MemoryOptions{SnapshotInterval: batches})
	value := func(i, round int) []byte { return fmt.Appendf(nil, "count=%d;sum=%d", round, i*round) }
	var spent [2]time.Duration // pebble, memory
	// Versions 1..4 add 250,000 groups each (version 4 is a snapshot);
	// version 5 updates 100,000 of them and deletes 10,000.
	for b := 0; b <= batches; b++ {
		ps, err := writer.Open(ctx, 7, Version(b))
		if err != nil {
			t.Fatal(err)
		}
		ms, err := mem.Open(ctx, 7, Version(b))
		if err != nil {
			t.Fatal(err)
		}
		for si, st := range []Store{ps, ms} {
			t0 := time.Now()
			if b < batches {
				for i := b * groups / batches; i < (b+1)*groups/batches; i++ {
					st.Put(millionKey(i), value(i, 1))
				}
			} else {
				for i := 0; i < groups; i += 10 {
					st.Put(millionKey(i), value(i, 2))
				}
				for i := 5; i < groups; i += 100 {
					st.Delete(millionKey(i))
				}
			}
			if _, err := st.Commit(ctx, ""); err != nil {
				t.Fatal(err)
			}
			spent[si] += time.Since(t0)
		}
	}
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d groups in %d batches: pebble %v, memory %v", groups, batches+1, spent[0].Round(time.Millisecond), spent[1].Round(time.Millisecond))

	reader, err := NewPebble(cpPeb, PebbleOptions{SnapshotInterval: batches, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	start := time.Now()
	ps, err := reader.Open(ctx, 7, batches+1)
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	t.Logf("fresh executor loaded version %d (%d-group snapshot + delta of 110,000 changes) in %v", batches+1, groups, load.Round(time.Millisecond))
	defer ps.Abort()

	ms, err := mem.Open(ctx, 7, batches+1)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Abort()
	want := scanAll(t, ms)
	if len(want) != groups-groups/100 {
		t.Fatalf("oracle has %d groups, want %d", len(want), groups-groups/100)
	}
	checkStore(t, "fresh executor", ps, want)
	// For comparison: the memory provider loading the pebble checkpoint.
	start = time.Now()
	fromPeb, err := NewMemory(cpPeb, MemoryOptions{}).Open(ctx, 7, batches+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("memory provider loaded the same version from the pebble checkpoint in %v", time.Since(start).Round(time.Millisecond))
	if fromPeb.NumRows() != int64(len(want)) {
		t.Fatalf("memory provider on the pebble checkpoint: %d rows, want %d", fromPeb.NumRows(), len(want))
	}
	fromPeb.Abort()
	got, _, err := ps.Get(millionKey(123_450))
	if err != nil || !bytes.Equal(got, value(123_450, 2)) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	t.Logf("memory estimate of the loaded partition: %d MiB", ps.MemoryBytes()>>20)

	// A reduce-like batch on the loaded partition: read and rewrite 20,000
	// groups, scan everything once, commit.
	ps.Abort()
	start = time.Now()
	st, err := reader.Open(ctx, 7, batches+1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < groups; i += 50 {
		if _, _, err := st.Get(millionKey(i)); err != nil {
			t.Fatal(err)
		}
		st.Put(millionKey(i), value(i, 3))
	}
	rows := 0
	st.Scan(func(_, _ []byte) error { rows++; return nil })
	if _, err := st.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("warm batch on the loaded partition (20,000 reads and writes, a %d-row scan, commit): %v", rows, time.Since(start).Round(time.Millisecond))
}

// TestPebbleDataDirLayout pins where the local databases live.
func TestPebbleDataDirLayout(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	dir := t.TempDir()
	pb, err := NewPebble(cp, PebbleOptions{Operator: 2, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	st, err := pb.Open(ctx, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Abort()
	if m, _ := filepath.Glob(filepath.Join(dir, "2", "5", "MANIFEST-*")); len(m) == 0 {
		t.Fatalf("no pebble database under %s", filepath.Join(dir, "2", "5"))
	}
}

func TestPebbleLocalDatabaseOfAnotherCheckpointIsRebuilt(t *testing.T) {
	ctx := context.Background()
	cp1, _ := objstore.NewFS(t.TempDir())
	cp2, _ := objstore.NewFS(t.TempDir())
	shared := t.TempDir()
	h1 := []model{{}, {"a": "1"}, {"a": "2"}, {"a": "2", "b": "1"}}
	h2 := []model{{}, {"x": "1"}, {"x": "1", "y": "1"}, {"y": "2"}}
	for _, run := range []struct {
		cp objstore.Store
		h  []model
	}{{cp1, h1}, {cp2, h2}} {
		pb, err := NewPebble(run.cp, PebbleOptions{DataDir: shared})
		if err != nil {
			t.Fatal(err)
		}
		for v := 0; v < 3; v++ {
			commitModel(t, pb, 0, Version(v), run.h[v+1])
		}
		if err := pb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The shared directory holds cp2's version 3; cp1 must get its own.
	pb, err := NewPebble(cp1, PebbleOptions{DataDir: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	st, err := pb.Open(ctx, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "checkpoint 1 after checkpoint 2 used the DataDir", st, h1[3])
	st.Abort()
}

func traceLines(c *objstore.Counting) string {
	var lines []string
	for _, e := range c.Trace() {
		lines = append(lines, e.Op+" "+e.Key)
	}
	return strings.Join(lines, "\n")
}

// The object-store calls of each path, with the commit records a driver
// writes (commits/N): commit writes only the delta; the background
// maintenance reads the record (polling it a while when it is not there
// yet) and writes the snapshot; a warm open then
// reads nothing (records are cached); a restart on the same DataDir reads one delta to check the
// database; a fresh DataDir lists, follows the records back to the
// snapshot they name, and loads it.
func TestPebbleObjectStoreCallsPerPath(t *testing.T) {
	ctx := context.Background()
	fs, _ := objstore.NewFS(t.TempDir())
	cp := objstore.NewCounting(fs)
	dataDir := t.TempDir()
	h := []model{{}, {"a": "1"}, {"a": "1", "b": "2"}, {"b": "3", "c": "4"}}
	pb, err := NewPebble(cp, PebbleOptions{SnapshotInterval: 3, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v < 2; v++ {
		commitModel(t, pb, 0, Version(v), h[v+1])
		writeRecord(t, fs, int64(v), CommitRecord{Deltas: []ids.PartitionID{0}})
	}
	cp.StartTrace()
	commitModel(t, pb, 0, 2, h[3])
	if got, want := traceLines(cp), "get commits/1\nput state/0/0/3.delta"; got != want {
		t.Fatalf("commit of a snapshot version:\n%s\nwant:\n%s", got, want)
	}
	cp.StartTrace()
	if n := maintain(t, pb); n != 0 {
		t.Fatalf("maintenance before the commit record wrote %d snapshots", n)
	}
	writeRecord(t, fs, 2, CommitRecord{Deltas: []ids.PartitionID{0}})
	if n := maintain(t, pb); n != 1 {
		t.Fatalf("maintenance after the commit record wrote %d snapshots, want 1", n)
	}
	// The first pass polls the record for a second (recordWait) before it
	// gives up; the second reads it once and writes the snapshot.
	got := traceLines(cp)
	polls, rest, _ := strings.Cut(got, "get commits/2\nput state/0/0/3.snapshot")
	if rest != "" || polls == "" || strings.Trim(strings.ReplaceAll(polls, "get commits/2\n", ""), "\n") != "" {
		t.Fatalf("maintenance:\n%s\nwant reads of commits/2, then one more and the snapshot", got)
	}
	for i, want := range []string{"", ""} {
		cp.StartTrace()
		st, err := pb.Open(ctx, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		st.Abort()
		if got := traceLines(cp); got != want {
			t.Fatalf("warm open %d made calls:\n%s\nwant:\n%s", i, got, want)
		}
	}
	pb.Close()

	cp.StartTrace()
	again, err := NewPebble(cp, PebbleOptions{SnapshotInterval: 3, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	st, err := again.Open(ctx, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "restart", st, h[3])
	st.Abort()
	if got, want := traceLines(cp), "get state/0/0/3.delta\nget commits/2"; got != want {
		t.Fatalf("restart on the same DataDir:\n%s\nwant:\n%s", got, want)
	}

	cp.StartTrace()
	fresh := newTestPebble(t, cp, 3)
	st, err = fresh.Open(ctx, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "fresh", st, h[3])
	st.Abort()
	if got, want := traceLines(cp), "list state/0/0/\nget commits/2\nget state/0/0/3.snapshot\nget state/0/0/3.delta"; got != want {
		t.Fatalf("fresh DataDir:\n%s\nwant:\n%s", got, want)
	}
}

// writeRecord writes commits/<batch> with a state record, as the driver
// does.
func writeRecord(t *testing.T, cp objstore.Store, batch int64, rec CommitRecord) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"version": 1, "batchId": batch, "state": rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Put(context.Background(), fmt.Sprintf("commits/%d", batch), data); err != nil {
		t.Fatal(err)
	}
}

func TestPebbleFailedDeltaWriteKeepsTheOldVersion(t *testing.T) {
	ctx := context.Background()
	fs, _ := objstore.NewFS(t.TempDir())
	for _, lostResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("lostResponse=%v", lostResponse), func(t *testing.T) {
			cp := objstore.NewFaulty(objstore.Prefixed(fs, fmt.Sprintf("%v/", lostResponse)))
			pb := newTestPebble(t, cp, 10)
			h := randomHistory(31, 3)
			commitModel(t, pb, 0, 0, h[1])
			cp.AddRule(objstore.FaultRule{Op: objstore.OpPut, KeyPrefix: "state/0/0/2.delta", Limit: 1, AfterWrite: lostResponse})
			st, err := pb.Open(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			st.Put([]byte("new"), []byte("x"))
			if _, err := st.Commit(ctx, ""); err == nil {
				t.Fatal("Commit succeeded despite the failed delta write")
			}
			st, err = pb.Open(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "after failed commit", st, h[1])
			st.Abort()
			commitModel(t, pb, 0, 1, h[2])
			fresh := newTestPebble(t, cp, 10)
			st, err = fresh.Open(ctx, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "retried commit on a fresh executor", st, h[2])
			st.Abort()
		})
	}
}

func TestPebblePartitionsWorkConcurrently(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	pb := newTestPebble(t, cp, 5)
	const parts = 6
	hs := make([][]model, parts)
	errs := make(chan error, parts)
	var wg sync.WaitGroup
	for p := range ids.PartitionID(parts) {
		hs[p] = randomHistory(uint64(100+p), 20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for v := 0; v < len(hs[p])-1; v++ {
					st, err := pb.Open(ctx, p, Version(v))
					if err != nil {
						return err
					}
					for k := range hs[p][v] {
						if _, ok := hs[p][v+1][k]; !ok {
							st.Delete([]byte(k))
						}
					}
					for k, val := range hs[p][v+1] {
						st.Put([]byte(k), []byte(val))
					}
					_ = st.MemoryBytes()
					if _, err := st.Commit(ctx, ""); err != nil {
						return err
					}
					if _, err := pb.Cleanup(ctx, p, Version(v)); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	fresh := newTestPebble(t, cp, 5)
	for p := range ids.PartitionID(parts) {
		last := Version(len(hs[p]) - 1)
		st, err := fresh.Open(ctx, p, last)
		if err != nil {
			t.Fatal(err)
		}
		checkStore(t, fmt.Sprintf("partition %d", p), st, hs[p][last])
		st.Abort()
	}
}
