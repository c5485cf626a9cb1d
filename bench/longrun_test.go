package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The long run's figures reach the report: table rows, the restart target
// and the PNG plots.
func TestLongRunReportParts(t *testing.T) {
	r := &LongRunResult{Batches: 1000, Retain: 100, Samples: []LongRunSample{
		{Batch: 99, Checkpoint: 250, Offsets: 100, Commits: 100, State: 50, SinkLog: 100, RSSBytes: 60 << 20},
		{Batch: 999, Checkpoint: 300, Offsets: 108, Commits: 107, State: 85, SinkLog: 1000, RSSBytes: 64 << 20},
	}, Restarts: []LongRunRestart{{AfterBatch: 99, FirstCommitMs: 400}, {AfterBatch: 100, FirstCommitMs: 600}, {AfterBatch: 999, FirstCommitMs: 700}}}
	ts := longRunTargets(r)
	if len(ts) != 1 || ts[0].Status != "met" || !strings.HasPrefix(ts[0].Measured, "1.40×") {
		t.Fatalf("target %+v, want met at 1.40× (700 ms over the early median 500 ms)", ts)
	}
	if ls := longRunLines(r); len(ls) < 5 || !strings.Contains(ls[0].value, "300 / 300") {
		t.Fatalf("table rows %+v", ls)
	}
	dir := t.TempDir()
	names, err := longRunPlots(dir, r)
	if err != nil || len(names) != 2 {
		t.Fatalf("plots %v, %v", names, err)
	}
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Size() == 0 {
			t.Fatalf("plot %s: %v", n, err)
		}
	}
	if ts := longRunTargets(nil); ts[0].Status != "not measured" {
		t.Fatalf("no long run: %+v", ts)
	}
}
