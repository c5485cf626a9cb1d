package dispatch

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/sink/parquet"
)

// 256 state partitions over 64 executors: the output equals the oracle,
// every executor owns four partitions, and a batch writes state files only
// for the partitions it changed (the tile's nine courses touch a few of
// the 256) and sink files only for the partitions that emitted rows.
func TestTileOn64ExecutorsWith256StatePartitionsWritesOnlyWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("64 executors")
	}
	const executors, partitions = 64, 256
	in, want := tileInput(t, 6000)
	c := newTestCluster(t, executors, "")
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Source.File.MaxFilesPerTrigger = 6
	spec.ShufflePartitions = partitions
	var mu sync.Mutex
	var batches []progress.Report
	r := c.runOn(spec, func(p *progress.Report) {
		mu.Lock()
		batches = append(batches, *p)
		mu.Unlock()
	})
	if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	perOwner := map[ids.ExecutorID]int{}
	for _, o := range r.Owners() {
		perOwner[o]++
	}
	if len(perOwner) != executors {
		t.Fatalf("partitions owned by %d executors, want %d", len(perOwner), executors)
	}
	for id, n := range perOwner {
		if n != partitions/executors {
			t.Fatalf("executor %s owns %d partitions, want %d", id, n, partitions/executors)
		}
	}
	maxWrites := 0
	for _, p := range batches {
		for _, op := range p.StateOperators {
			changed := op.NumRowsUpdated + op.NumRowsRemoved
			// A delta per changed partition, and a snapshot every tenth
			// version of a changed partition.
			if int64(op.NumStateStoreWrites) > 2*changed {
				t.Fatalf("batch %d changed %d state rows but wrote %d state files", p.BatchID, changed, op.NumStateStoreWrites)
			}
			maxWrites = max(maxWrites, op.NumStateStoreWrites)
		}
	}
	if maxWrites == 0 || maxWrites > partitions/4 {
		t.Fatalf("at most %d state files per batch, want some and far fewer than %d partitions", maxWrites, partitions)
	}
	store, err := objstore.NewFS(spec.Sink.Parquet.Path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parquet.LogEntries(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	emitted := map[ids.BatchID]int64{}
	for _, p := range batches {
		emitted[p.BatchID] = p.Sink.NumOutputRows
	}
	for _, e := range entries {
		if int64(len(e.Files)) > emitted[e.BatchID] {
			t.Fatalf("batch %d wrote %d sink files for %d rows", e.BatchID, len(e.Files), emitted[e.BatchID])
		}
	}
	t.Logf("%d batches, at most %d state files a batch, %d sink log entries", len(batches), maxWrites, len(entries))
}
