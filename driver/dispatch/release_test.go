package dispatch

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/executor"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
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
			held := map[ids.BatchID][]map[ids.PartitionID]int64{} // batch -> per node
			snapshot := func(p *progress.Report) {
				c.mu.Lock()
				nodes := append([]*executor.Node(nil), c.nodes...)
				c.mu.Unlock()
				var per []map[ids.PartitionID]int64
				for _, n := range nodes {
					per = append(per, n.HeldState(p.ID))
				}
				mu.Lock()
				held[p.BatchID] = per
				mu.Unlock()
			}
			var joined int
			var drained <-chan error
			c.runOn(spec, func(p *progress.Report) {
				snapshot(p)
				switch p.BatchID {
				case 2:
					c.addNode()
					joined = len(c.nodes) - 1
					c.waitLive(3)
				case 6:
					drained = c.drainAsync(joined)
				}
			})
			if drained == nil {
				t.Fatal("no batch 6")
			}
			if err := <-drained; err != nil {
				t.Errorf("drain: %v", err)
			}
			if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
				t.Fatalf("output differs from the oracle:\n%s", d)
			}
			mu.Lock()
			defer mu.Unlock()
			total := func(m map[ids.PartitionID]int64) (n int64) {
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
			count := map[ids.PartitionID]int{}
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

// The batch's processing time reaches the executors' map tasks over gRPC:
// a far-future row is set aside there (watermark.maxEventTimeAhead) and
// counted, and the windows still close.
func TestFarFutureRowIsSetAsideOnExecutors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	line := func(id, ts string) string {
		return `{"event_id":"` + id + `","course_id":"c1","lesson_id":"l1","event_time":"` + ts + `"}`
	}
	files := map[string]string{
		"001.jsonl": line("e1", "2026-03-02T09:01:00Z") + "\n" + line("bad-clock", "2099-01-01T00:00:00Z") + "\n",
		"002.jsonl": line("e2", "2026-03-02T09:31:00Z") + "\n",
	}
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(in, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestCluster(t, 2, "")
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Watermark.MaxEventTimeAhead = query.Duration(time.Hour)
	var mu sync.Mutex
	var ahead, malformed int64
	c.runOn(spec, func(p *progress.Report) {
		mu.Lock()
		ahead += p.NumRowsTooFarAhead
		malformed += p.NumRowsMalformed
		mu.Unlock()
	})
	if ahead != 1 || malformed != 1 {
		t.Fatalf("want the 2099 row set aside on an executor (1 too far ahead, 1 malformed), got %d, %d", ahead, malformed)
	}
	want := []tiletest.Window{{Start: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), Course: "c1", Count: 1}}
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("windows:\n%s", d)
	}
}
