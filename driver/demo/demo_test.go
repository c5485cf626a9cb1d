package demo

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// The embedded cluster runs the tile from the broker the feeder fills:
// batches close windows into the Parquet sink, and cancelling the context
// is a clean stop; a second run on the same directory resumes the
// checkpoint.
func TestEmbeddedClusterClosesWindowsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker, a driver and two executors")
	}
	dir := t.TempDir()
	run := func() (first, last progress.Report, broker string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var mu sync.Mutex
		var seen []progress.Report
		err := Run(ctx, Options{
			Dir:      dir,
			Announce: func(_ query.Spec, addr string) { broker = addr },
			Observer: progress.Committed(func(p *progress.Report) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, *p)
				if p.Sink.NumOutputRows > 0 && len(seen) >= 3 {
					cancel()
				}
			}),
		})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 3 {
			t.Fatalf("stopped after %d batches (broker %s)", len(seen), broker)
		}
		return seen[0], seen[len(seen)-1], broker
	}
	first, last, broker := run()
	if broker == "" || first.BatchID != 0 || last.Sink.NumOutputRows == 0 {
		t.Fatalf("first run: broker %q, batches %d..%d, last wrote %d rows", broker, first.BatchID, last.BatchID, last.Sink.NumOutputRows)
	}
	st, err := objstore.NewFS(filepath.Join(dir, "course_activity_tile"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parquet.LogEntries(context.Background(), st)
	if err != nil || len(entries) == 0 {
		t.Fatalf("sink log: %d entries, %v", len(entries), err)
	}
	again, _, _ := run()
	if again.BatchID != last.BatchID+1 {
		t.Fatalf("second run started at batch %d; the first committed up to %d", again.BatchID, last.BatchID)
	}
}
