package microbatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

// Deletes that fail make the background cleaner log and count a failed
// pass; no batch fails, and a later pass deletes what the failed one left,
// so the log ends within minBatchesToRetain + CleanupEvery entries.
func TestCleanupFailuresAreLoggedAndNeverFailABatch(t *testing.T) {
	var lines []string
	for i := range 60 {
		lines = append(lines, line(fmt.Sprintf("c%d", i%3), float64(i)))
	}
	faulty := objstore.NewFaulty(objstore.NewMem())
	faulty.AddRule(objstore.FaultRule{Op: objstore.OpDelete, KeyPrefix: "offsets/", Limit: 1})
	logs := &syncbuf.Buffer{}
	const retain = 10
	// Batch 40 waits (after its commit) for a pass to reach the log, so
	// passes run during the run, not only at its end.
	passed := make(chan struct{})
	var once sync.Once
	progress, _ := runQueryWith(t, lines, 1, func(s *query.Spec) { s.MinBatchesToRetain = retain }, func(c *microbatch.Config) {
		c.Checkpoint = faulty
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c.Hook = func(point string, batch ids.BatchID) {
			switch {
			case point == "cleanup-log" && batch >= 30:
				once.Do(func() { close(passed) })
			case point == "after-commit" && batch == 40:
				select {
				case <-passed:
				case <-time.After(time.Minute):
					t.Error("no cleanup pass reached the log while batch 40 waited")
				}
			}
		}
	})
	if n := len(progress); n < 60 {
		t.Fatalf("%d batches committed, want at least 60", n)
	}
	if !strings.Contains(logs.String(), "checkpoint log cleanup failed") {
		t.Fatalf("no failed cleanup pass logged:\n%s", logs.String())
	}
	ids, err := checkpoint.New(faulty).OffsetIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := progress[len(progress)-1].BatchID
	if len(ids) > retain+microbatch.CleanupEvery || ids[0] < checkpoint.RetainFrom(last, retain)-microbatch.CleanupEvery {
		t.Fatalf("offsets %v after batch %d: the passes after the failures did not catch up", ids, last)
	}
}
