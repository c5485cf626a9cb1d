package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/file"
)

type driverCrash struct{}

// crashRunOn runs spec on the cluster until the driver reaches point of
// batch, where the driver "dies" (its run ends there); the executors keep
// running with what they hold.
func (c *testCluster) crashRunOn(spec query.Spec, point string, batch ids.BatchID) {
	c.t.Helper()
	ctx := context.Background()
	job, err := microbatch.Build(ctx, spec, microbatch.Options{Logger: testLogger(c.t).With("proc", "scheduler"), Hook: func(p string, b ids.BatchID) {
		if p == point && b == batch {
			panic(driverCrash{})
		}
	}})
	if err != nil {
		c.t.Fatal(err)
	}
	defer job.Close()
	r, err := c.driver.NewRunner(RunnerOptions{QueryID: job.Query.QueryID(), Spec: job.Spec, Logger: testLogger(c.t).With("proc", "runner")})
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() {
		if _, ok := recover().(driverCrash); !ok {
			c.t.Fatalf("the run finished without reaching %s of batch %d", point, batch)
		}
	}()
	_ = job.RunWith(ctx, r, nil)
}

// Both attempts of a batch change the same state partitions, reading
// different data: the driver dies after batch 2's executors committed their
// state (before the batch's commit), the batch's input files are rewritten,
// and a new driver run re-runs the batch on what they now hold. A third
// executor joins for the re-run and takes partitions from the two that
// keep the abandoned attempt's versions in memory; it drains after the
// re-run, so those partitions go back to executors whose cached version
// of the same number is the abandoned one. Every executor loads the
// committed version: the output equals the oracle of the data read.
func TestBothAttemptsOfABatchChangeAPartitionEveryExecutorLoadsTheCommittedOne(t *testing.T) {
	for _, store := range []string{"memory", "pebble"} {
		t.Run(store, func(t *testing.T) {
			c := newTestCluster(t, 2, "")
			dir := t.TempDir()
			in := filepath.Join(dir, "in")
			events := tiletest.Events(5, 6000, 150*time.Millisecond, 4*time.Minute, 9)
			const perFile = 500
			if err := tiletest.WriteFiles(in, events, perFile); err != nil {
				t.Fatal(err)
			}
			spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
			spec.Source.File.MaxFilesPerTrigger = 1
			spec.StateStore = store

			c.crashRunOn(spec, "before-sink-commit", 2)

			// Rewrite batch 2's file: the re-run reads other events of the
			// same windows (each course's second half of the file only).
			cp, err := objstore.NewFS(spec.CheckpointLocation)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := cp.Get(context.Background(), "offsets/2")
			if err != nil {
				t.Fatal(err)
			}
			var entry struct {
				Sources []struct {
					End json.RawMessage `json:"end"`
				} `json:"sources"`
			}
			var off file.Offset
			if err := json.Unmarshal(raw, &entry); err != nil || len(entry.Sources) != 1 {
				t.Fatalf("offsets/2: %v", err)
			}
			if err := json.Unmarshal(entry.Sources[0].End, &off); err != nil || len(off.Files) != 1 {
				t.Fatalf("offsets/2 end: %v (%s)", err, entry.Sources[0].End)
			}
			name := off.Files[0]
			idx := -1
			for i := 0; i*perFile < len(events); i++ {
				if strings.HasSuffix(name, partName(i)) {
					idx = i
				}
			}
			if idx < 0 {
				t.Fatalf("batch 2 read %s, not a file of the input", name)
			}
			kept := append([]tiletest.Event(nil), events[:idx*perFile]...)
			var b strings.Builder
			chunk := events[idx*perFile : min(len(events), (idx+1)*perFile)]
			for _, e := range chunk[len(chunk)/2:] {
				b.WriteString(e.JSON())
				b.WriteByte('\n')
			}
			kept = append(kept, chunk[len(chunk)/2:]...)
			kept = append(kept, events[min(len(events), (idx+1)*perFile):]...)
			if err := os.WriteFile(filepath.Join(in, partName(idx)), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}

			third := c.addNode()
			c.waitLive(3)
			// Stop the executors before their data directories (registered
			// with the test after the cluster's own cleanup) are removed.
			t.Cleanup(func() {
				for i := range 3 {
					_ = c.stop(i)
				}
			})
			var rerun bool
			var drained <-chan error
			c.runOn(spec, func(p *progress.Report) {
				if p.BatchID == 2 {
					rerun = p.Rerun
					drained = c.drainAsync(2)
				}
			})
			if drained == nil {
				t.Fatal("no batch 2")
			}
			if err := <-drained; err != nil {
				t.Errorf("drain: %v", err)
			}
			if !rerun {
				t.Fatal("the new driver run did not re-run batch 2")
			}
			want := tiletest.Oracle(kept, 5*time.Minute, 10*time.Minute)
			if d := tiletest.Diff(want, sinkWindows(t, spec.Sink.Parquet.Path)); d != "" {
				t.Fatalf("output differs from the oracle of the data read (the third executor was %s):\n%s", third.ID(), d)
			}

			// Both attempts changed partitions: two files of version 3.
			keys, err := cp.List(context.Background(), "state/")
			if err != nil {
				t.Fatal(err)
			}
			perPart := map[string]int{}
			for _, k := range keys {
				if strings.Contains(k, "/3-") && strings.HasSuffix(k, ".delta") {
					perPart[filepath.Dir(k)]++
				}
			}
			two := 0
			for _, n := range perPart {
				if n == 2 {
					two++
				}
			}
			if two == 0 {
				t.Fatalf("no partition has deltas of both attempts for version 3: %v", perPart)
			}
		})
	}
}

func partName(i int) string { return fmt.Sprintf("part-%05d.jsonl", i) }
