package cluster

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/tiletest"
	"github.com/sluicehq/sluice/scheduler"
)

// Partitions that move to a joining executor are released by the executors
// that owned them (memory held drops, no partition is held twice), and come
// back exact when that executor drains.
func TestStateOfPartitionsThatMovedAwayIsReleased(t *testing.T) {
	for _, store := range []string{"memory", "pebble"} {
		t.Run(store, func(t *testing.T) {
			in, want := tileInput(t, 8000)
			c := newTestCluster(t, 2, "")
			dir := t.TempDir()
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			spec.Source.File.MaxFilesPerTrigger = 2
			spec.StateStore = store
			var mu sync.Mutex
			held := map[int64][]map[int]int64{} // batch -> per node
			snapshot := func(p *scheduler.Progress) {
				c.mu.Lock()
				nodes := append([]*Node(nil), c.nodes...)
				c.mu.Unlock()
				var per []map[int]int64
				for _, n := range nodes {
					per = append(per, n.HeldState(p.ID))
				}
				mu.Lock()
				held[p.BatchID] = per
				mu.Unlock()
			}
			var joined int
			c.runOn(spec, func(p *scheduler.Progress) {
				snapshot(p)
				switch p.BatchID {
				case 2:
					c.addNode()
					joined = len(c.nodes) - 1
					c.waitLive(3)
				case 6:
					if err := c.stop(joined); err != nil {
						t.Errorf("drain: %v", err)
					}
				}
			})
			if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
				t.Fatalf("output differs from the oracle:\n%s", d)
			}
			mu.Lock()
			defer mu.Unlock()
			total := func(m map[int]int64) (n int64) {
				for _, b := range m {
					n += b
				}
				return n
			}
			before, after := held[2], held[5]
			t.Logf("held before the join: %v (%d bytes); after: %v (%d bytes on the first two)", before, total(before[0])+total(before[1]), after, total(after[0])+total(after[1]))
			if len(before[0])+len(before[1]) != spec.ShufflePartitions {
				t.Fatalf("before the join the two executors hold %d and %d partitions, want %d in all", len(before[0]), len(before[1]), spec.ShufflePartitions)
			}
			// After the join (batch 3 runs on three executors) every
			// partition is held by its one owner only.
			count := map[int]int{}
			for _, m := range after {
				for p := range m {
					count[p]++
				}
			}
			for p, n := range count {
				if n > 1 {
					t.Fatalf("partition %d held by %d executors after it moved: %v", p, n, after)
				}
			}
			// (Bytes per partition grow with the open windows, so the
			// count of partitions held is what must drop.)
			if len(after[0])+len(after[1]) >= len(before[0])+len(before[1]) {
				t.Fatalf("the executors that gave partitions away still hold as much: before %v, after %v", before, after)
			}
			if len(after) < 3 || len(after[2]) == 0 {
				t.Fatalf("the joining executor holds no state: %v", after)
			}
		})
	}
}
