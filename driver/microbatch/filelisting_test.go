package microbatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/file"
)

// A running query on an S3 directory with fullListingInterval: files in
// newer hour directories are read by the partial listings, a file landing
// late in an older hour directory is read once the next full listing runs,
// and every row counts once in the output.
func TestFileSourceOnS3WithPartialListingsReadsALateFileInAnOlderDirectory(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	in := srv.Store(t, "landing", "in/")
	put := func(key string, lines ...string) {
		t.Helper()
		var b []byte
		for _, l := range lines {
			b = append(append(b, l...), '\n')
		}
		if err := in.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put("date=2026-03-02/hour=09/a.jsonl", ev("e1", "c1", "2026-03-02T09:01:00Z"))
	put("date=2026-03-02/hour=10/b.jsonl", ev("e2", "c1", "2026-03-02T09:06:00Z"))
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := tiletest.Spec(srv.URI("landing", "in/"), out, filepath.Join(dir, "cp"))
	spec.Source.File.FullListingInterval = query.Duration(2 * time.Second)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}
	var mu sync.Mutex
	var rows int64
	opts := microbatch.Options{Store: objstore.Options{S3: srv.Options("landing")}, Observer: progress.Committed(func(p *progress.Report) {
		mu.Lock()
		rows += p.NumInputRows
		mu.Unlock()
	})}
	job, err := microbatch.Build(ctx, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- job.Run(runCtx, nil) }()
	waitRows := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			got := rows
			mu.Unlock()
			if got == n {
				return
			}
			if got > n || time.Now().After(deadline) {
				cancel()
				t.Fatalf("read %d rows, want %d", got, n)
			}
		}
	}
	waitRows(2)
	// Late, in the older hour directory (before the directory of the
	// newest file taken): found by the next full listing.
	put("date=2026-03-02/hour=09/late.jsonl", ev("e3", "c2", "2026-03-02T09:03:00Z"))
	waitRows(3)
	put("date=2026-03-02/hour=11/c.jsonl", ev("e4", "c1", "2026-03-02T09:31:00Z"))
	waitRows(4)
	// The closing no-data batch may still be due: wait for its output.
	want := []tiletest.Window{
		{Start: at("2026-03-02T09:00:00Z"), Course: "c1", Count: 1},
		{Start: at("2026-03-02T09:00:00Z"), Course: "c2", Count: 1},
		{Start: at("2026-03-02T09:05:00Z"), Course: "c1", Count: 1},
	}
	var d string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if d = tiletest.Diff(want, sinkWindows(t, out, true)); d == "" {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if d != "" {
		t.Fatalf("output differs:\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if rows != 4 {
		t.Fatalf("read %d rows in all, want 4 (each once)", rows)
	}
}

// Progress shows a large file-source offset compact, while offsets/N
// keeps it whole.
func TestProgressShowsALargeFileOffsetCompact(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	const n = 1500
	for i := range n {
		writeLines(t, filepath.Join(in, fmt.Sprintf("date=2026-03-02/part-%05d.jsonl", i)), ev(fmt.Sprintf("e%d", i), "c1", "2026-03-02T09:01:00Z"))
	}
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Trigger = query.Trigger{AvailableNow: true}
	progress := run(t, spec, microbatch.Options{})
	if len(progress) == 0 || len(progress[0].Sources) == 0 {
		t.Fatal("no progress")
	}
	end := progress[0].Sources[0].EndOffset
	var shown struct {
		Files    []string `json:"files"`
		NumFiles int      `json:"numFiles"`
		NumSeen  int      `json:"numSeen"`
	}
	if err := json.Unmarshal(end, &shown); err != nil {
		t.Fatal(err)
	}
	if len(end) > 16<<10 || shown.NumFiles != n || shown.NumSeen != n || len(shown.Files) != 100 {
		t.Fatalf("progress endOffset of %d bytes: %d files shown, numFiles %d, numSeen %d", len(end), len(shown.Files), shown.NumFiles, shown.NumSeen)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "cp", "offsets", "0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) < file.ProgressOffsetMaxBytes || !strings.Contains(string(logged), fmt.Sprintf("part-%05d.jsonl", n-1)) {
		t.Fatalf("offsets/0 holds %d bytes, want every name", len(logged))
	}
}
