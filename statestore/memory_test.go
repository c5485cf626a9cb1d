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

func commitBatch(t *testing.T, p Provider, part ids.PartitionID, v Version, put map[string]string, del []string) {
	t.Helper()
	st, err := p.Open(context.Background(), part, v)
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range put {
		st.Put([]byte(k), []byte(val))
	}
	for _, k := range del {
		st.Delete([]byte(k))
	}
	if _, err := st.Commit(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, p Provider, part ids.PartitionID, v Version) map[string]string {
	t.Helper()
	st, err := p.Open(context.Background(), part, v)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	m := map[string]string{}
	st.Scan(func(k, val []byte) error { m[string(k)] = string(val); return nil })
	if int64(len(m)) != st.NumRows() {
		t.Fatalf("NumRows %d but Scan gave %d", st.NumRows(), len(m))
	}
	return m
}

// Every committed version can be rebuilt from the checkpoint by a fresh
// provider, including older ones, with unchanged batches writing nothing.
func TestEveryVersionLoadsFromCheckpointInAFreshProvider(t *testing.T) {
	store, _ := objstore.NewFS(t.TempDir())
	p := NewMemory(store, MemoryOptions{SnapshotInterval: 3})
	want := map[Version]map[string]string{0: {}}
	cur := map[string]string{}
	for v := Version(0); v < 10; v++ {
		put := map[string]string{fmt.Sprintf("k%d", v): fmt.Sprint(v), "shared": fmt.Sprint(v)}
		var del []string
		if v%4 == 3 {
			put = nil // an unchanged batch
		}
		if v == 5 {
			del = []string{"k1", "k2"}
		}
		commitBatch(t, p, 0, v, put, del)
		for k, val := range put {
			cur[k] = val
		}
		for _, k := range del {
			delete(cur, k)
		}
		snap := map[string]string{}
		for k, val := range cur {
			snap[k] = val
		}
		want[v+1] = snap
	}
	fresh := NewMemory(store, MemoryOptions{SnapshotInterval: 3})
	for v := Version(10); v >= 0; v-- {
		got := contents(t, fresh, 0, v)
		if fmt.Sprint(got) != fmt.Sprint(want[v]) {
			t.Fatalf("version %d = %v, want %v", v, got, want[v])
		}
	}
	keys, _ := store.List(context.Background(), "state/")
	for _, k := range keys {
		if strings.HasSuffix(k, "/4.delta") || strings.HasSuffix(k, "/8.delta") {
			t.Errorf("an unchanged batch wrote %s", k)
		}
	}
}

func TestAbortDiscardsChanges(t *testing.T) {
	store, _ := objstore.NewFS(t.TempDir())
	p := NewMemory(store, MemoryOptions{})
	commitBatch(t, p, 1, 0, map[string]string{"a": "1"}, nil)
	st, _ := p.Open(context.Background(), 1, 1)
	st.Put([]byte("b"), []byte("2"))
	st.Delete([]byte("a"))
	st.Abort()
	if got := contents(t, p, 1, 1); len(got) != 1 || got["a"] != "1" {
		t.Fatalf("after Abort state is %v", got)
	}
}

func TestCorruptStateFileIsRefused(t *testing.T) {
	ctx := context.Background()
	store, _ := objstore.NewFS(t.TempDir())
	p := NewMemory(store, MemoryOptions{})
	commitBatch(t, p, 0, 0, map[string]string{"a": "1"}, nil)
	b, _ := store.Get(ctx, "state/0/0/1.delta")
	b[len(b)/2] ^= 0xff
	store.Put(ctx, "state/0/0/1.delta", b)
	_, err := NewMemory(store, MemoryOptions{}).Open(ctx, 0, 1)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want ErrCorrupt for a flipped byte, got %v", err)
	}
}

// Cleanup keeps storage bounded and every retained version loadable.
func TestCleanupKeepsStorageBoundedAndRetainedVersionsLoadable(t *testing.T) {
	ctx := context.Background()
	store, _ := objstore.NewFS(t.TempDir())
	p := NewMemory(store, MemoryOptions{SnapshotInterval: 10})
	const retain = 20
	batches := Version(shortOr(300, 100)) // -short: the fast loop
	for v := Version(0); v < batches; v++ {
		commitBatch(t, p, 0, v, map[string]string{fmt.Sprintf("k%d", v%50): fmt.Sprint(v)}, nil)
		recordAndMaintain(t, store, p, 0, v)
		if v%10 == 0 && v+1 >= retain {
			if _, err := p.Cleanup(ctx, 0, v+1-retain+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, _ := store.List(ctx, "state/")
	// Retained deltas, plus up to two snapshot intervals between the
	// newest snapshot below the cut and the cleanups, plus their snapshots.
	if bound := retain + 2*10 + 5; len(keys) > bound {
		t.Fatalf("%d state files after %d batches with %d retained, want at most %d", len(keys), batches, retain, bound)
	}
	fresh := NewMemory(store, MemoryOptions{SnapshotInterval: 10})
	for v := batches; v > batches-retain+10; v-- {
		if _, err := fresh.Open(ctx, 0, v); err != nil {
			t.Fatalf("retained version %d not loadable: %v", v, err)
		} else {
			fresh.Close()
		}
	}
}
