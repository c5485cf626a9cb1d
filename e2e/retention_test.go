package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
)

// The driver is SIGKILLed by the background cleaner's fault points: in a
// pass, before its state deletions and (the next run, whose first pass runs
// at start) between its state deletions and its log deletions. Each restart
// re-runs or plans from what the cleaner left; the output equals the oracle
// exactly once and the log ends within minBatchesToRetain + CleanupEvery
// entries.
func TestDriverKilledDuringCleanupResumesExactlyOnce(t *testing.T) {
	events := tiletest.Events(23, 2400, time.Second, 30*time.Second, 5)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	if err := tiletest.WriteFiles(in, events, 20); err != nil { // 120 files
		t.Fatal(err)
	}
	const retain = 10
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.MinBatchesToRetain = retain
	spec.SnapshotInterval = 3
	specPath := writeSpec(t, spec)
	for _, point := range []string{"cleanup-log", "cleanup-state", "cleanup-log"} {
		p := NewProc(t, "driver", bins.driver, "run", "-f", specPath).Env("SLUICE_FAULT=" + point)
		p.Start()
		if err := p.Wait(120 * time.Second); !killedBySignal(err) {
			t.Fatalf("driver was not killed at %s (exit %v); logs:\n%s", point, err, p.Logs())
		}
	}
	progressPath := filepath.Join(dir, "progress.jsonl")
	last := NewProc(t, "driver", bins.driver, "run", "-f", specPath, "--progress-json", progressPath)
	last.Start()
	if err := last.Wait(180 * time.Second); err != nil {
		t.Fatalf("restarted driver failed: %v; logs:\n%s", err, last.Logs())
	}
	checkSink(t, out, want)
	progress := readProgress(t, progressPath)
	if len(progress) == 0 {
		t.Fatal("the last run ran no batch")
	}
	lastBatch := progress[len(progress)-1].BatchID
	log := checkpoint.New(mustFS(t, cp))
	for _, list := range []func(context.Context) ([]ids.BatchID, error){log.OffsetIDs, log.CommitIDs} {
		logged, err := list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(logged) == 0 || logged[len(logged)-1] != lastBatch || len(logged) > retain+microbatch.CleanupEvery {
			t.Fatalf("log ids %v after batch %d: want at most %d, ending at the last batch", logged, lastBatch, retain+microbatch.CleanupEvery)
		}
	}
}
