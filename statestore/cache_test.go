package statestore

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// A partition released (it moved to another executor) stops being held:
// its map or local database is gone, an open partition is not released,
// and opening it again later rebuilds it exactly from the checkpoint.
func TestReleasedPartitionIsDroppedAndReloadsFromTheCheckpoint(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			cp, _ := objstore.NewFS(t.TempDir())
			dataDir := t.TempDir()
			var prov Provider
			if kind == "memory" {
				prov = NewMemory(cp, MemoryOptions{SnapshotInterval: 2})
			} else {
				pb, err := NewPebble(cp, PebbleOptions{DataDir: dataDir, SnapshotInterval: 2})
				if err != nil {
					t.Fatal(err)
				}
				prov = pb
			}
			defer prov.Close()
			cache := prov.(Cache)
			for v := Version(0); v < 3; v++ {
				for p := range ids.PartitionID(3) {
					commitBatch(t, prov, p, v, map[string]string{"k" + string(rune('a'+v)): "x", "n": string(rune('0' + v))}, nil)
				}
			}
			held := cache.Held()
			if len(held) != 3 || held[1] <= 0 {
				t.Fatalf("held before release: %v, want 3 partitions with bytes", held)
			}
			st, err := prov.Open(context.Background(), 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := cache.Release(2); ok || err != nil {
				t.Fatalf("an open partition was released: %v, %v", ok, err)
			}
			st.Abort()
			for _, p := range []ids.PartitionID{1, 2} {
				if ok, err := cache.Release(p); !ok || err != nil {
					t.Fatalf("release %d: %v, %v", p, ok, err)
				}
			}
			if ok, _ := cache.Release(1); ok {
				t.Fatal("second release of the same partition reported a release")
			}
			held = cache.Held()
			if keys := slices.Sorted(maps.Keys(held)); !slices.Equal(keys, []ids.PartitionID{0}) {
				t.Fatalf("held after releasing 1 and 2: %v, want only 0", held)
			}
			if kind == "pebble" {
				if _, err := os.Stat(filepath.Join(dataDir, "0", "1")); !os.IsNotExist(err) {
					t.Fatalf("released partition's local database still on disk: %v", err)
				}
			}
			want := map[string]string{"ka": "x", "kb": "x", "kc": "x", "n": "2"}
			for p := range ids.PartitionID(3) {
				got := contents(t, prov, p, 3)
				if len(got) != len(want) || got["n"] != "2" || got["kc"] != "x" {
					t.Fatalf("partition %d after release and reopen: %v, want %v", p, got, want)
				}
			}
		})
	}
}
