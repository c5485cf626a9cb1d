package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/sink/parquet"
)

// windowSet reads a sink snapshot as windows, keyed start+course; dups
// counts windows seen twice.
func windowSet(ws []tiletest.Window) (map[string]int64, int) {
	out := map[string]int64{}
	dups := 0
	for _, w := range ws {
		k := w.Start.UTC().Format(time.RFC3339) + " " + w.Course
		if _, ok := out[k]; ok {
			dups++
		}
		out[k] = w.Count
	}
	return out, dups
}

// listDirWindows reads what a directory lister reads (parquet.ListDirectory
// skips '_' and '.' paths, as Spark, Hive and Trino do), listing again if a
// file it listed is gone when opened.
func listDirWindows(ctx context.Context, st objstore.Store) ([]tiletest.Window, error) {
	for attempt := 0; ; attempt++ {
		files, err := parquet.ListDirectory(ctx, st)
		if err != nil {
			return nil, err
		}
		var ws []tiletest.Window
		var rerr error
		for _, f := range files {
			data, err := st.Get(ctx, f)
			if err != nil {
				rerr = err
				break
			}
			cols, rows, err := parquet.ReadFile(data)
			if err != nil {
				return nil, err
			}
			w, err := tiletest.FromRows(cols, rows)
			if err != nil {
				return nil, err
			}
			ws = append(ws, w...)
		}
		if rerr == nil {
			return ws, nil
		}
		if !errors.Is(rerr, objstore.ErrNotExist) || attempt > 100 {
			return nil, rerr
		}
	}
}

// While the tile runs (processingTime, new input files arriving) and two
// readers poll the sink (one follows the log, one lists the directory),
// driver compact runs again and again: every closed date ends in one file;
// every snapshot holds each window once, as the oracle has it, and all the
// windows the previous snapshot of that reader held; the final output
// equals the oracle.
func TestCompactWhileTheQueryRunsAndReadersPoll(t *testing.T) {
	t.Run("driver compact", func(t *testing.T) { compactLive(t, false) })
	if testing.Short() {
		return // the fast loop: one of the two
	}
	t.Run("compactClosedDates", func(t *testing.T) { compactLive(t, true) })
}

// compactLive is the test; policy uses sink.parquet.compactClosedDates
// instead of driver compact.
func compactLive(t *testing.T, policy bool) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(15, 1200, 6*time.Minute, 2*time.Minute, 3) // 2026-03-02 .. 03-07
	const perFile = 30
	files := len(events) / perFile
	oracle := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	want, _ := windowSet(oracle)
	if err := tiletest.WriteFiles(in, events[:10*perFile], perFile); err != nil {
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(20 * time.Millisecond)}
	spec.Sink.Parquet.CompactInterval = 5
	spec.MinBatchesToRetain = 5
	spec.Sink.Parquet.CompactClosedDates = policy

	var mu sync.Mutex
	var last *progress.Report
	var rowsRead int64 // input rows of every batch so far: the run is done when it read them all
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{Observer: progress.Committed(func(p *progress.Report) {
		mu.Lock()
		last = p
		rowsRead += p.NumInputRows
		mu.Unlock()
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- job.Run(ctx, nil) }()
	defer func() {
		cancel()
		<-runErr
		job.Close()
	}()

	sink, err := objstore.NewFS(out)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	snaps := make([]int, 2)
	poll := func(i int, name string, read func() ([]tiletest.Window, error)) {
		defer wg.Done()
		prev := map[string]int64{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			ws, err := read()
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			got, dups := windowSet(ws)
			if dups > 0 {
				errs <- fmt.Errorf("%s snapshot %d: %d windows twice", name, snaps[i], dups)
				return
			}
			for k, n := range got {
				if want[k] != n {
					errs <- fmt.Errorf("%s snapshot %d: window %s counts %d, the oracle %d", name, snaps[i], k, n, want[k])
					return
				}
			}
			for k := range prev {
				if _, ok := got[k]; !ok {
					errs <- fmt.Errorf("%s snapshot %d: window %s, there before, is missing", name, snaps[i], k)
					return
				}
			}
			prev = got
			snaps[i]++
		}
	}
	wg.Add(2)
	go poll(0, "log reader", func() ([]tiletest.Window, error) {
		cols, rows, err := parquet.ReadCommitted(context.Background(), sink)
		if err != nil || len(rows) == 0 {
			return nil, err
		}
		return tiletest.FromRows(cols, rows)
	})
	go poll(1, "directory lister", func() ([]tiletest.Window, error) { return listDirWindows(context.Background(), sink) })

	// Feed the rest of the input while compacting every closed date.
	compacted := map[string]bool{}
	fed := 10
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the query did not finish the input in time; compacted %v", compacted)
		}
		if fed < files {
			if err := tiletest.WriteFiles(filepath.Join(dir, "tmp"), events[fed*perFile:(fed+1)*perFile], perFile); err != nil {
				t.Fatal(err)
			}
			if err := renameInto(filepath.Join(dir, "tmp", "part-00000.jsonl"), filepath.Join(in, fmt.Sprintf("part-%05d.jsonl", fed))); err != nil {
				t.Fatal(err)
			}
			fed++
		}
		if policy {
			for d, n := range filesPerDateDir(out) {
				c, _ := filepath.Glob(filepath.Join(out, "window_date="+d, "compact-*.parquet"))
				if n == 1 && len(c) == 1 {
					compacted[d] = true
				}
			}
		} else {
			rep, err := compactSink(context.Background(), out, cp, parquet.CompactOptions{}, objstore.Options{})
			if err != nil && !strings.Contains(err.Error(), "no batch committed yet") && !strings.Contains(err.Error(), "no _sink_log") {
				t.Fatal(err)
			}
			if rep != nil {
				for _, d := range rep.Dates {
					if d.Skipped == "" {
						compacted[d.Date] = true
					}
				}
			}
		}
		mu.Lock()
		p, read := last, rowsRead
		mu.Unlock()
		// A no-data batch from before the last file was taken is not the
		// end: every row must have been read, then a no-data batch closed
		// the last windows.
		if fed == files && read == int64(files*perFile) && p != nil && p.NoData && len(compacted) >= 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("compacted %d dates; %d log-reader and %d lister snapshots", len(compacted), snaps[0], snaps[1])
	if snaps[0] < 5 || snaps[1] < 5 {
		t.Fatalf("too few snapshots: %v", snaps)
	}
	for _, read := range []func() ([]tiletest.Window, error){
		func() ([]tiletest.Window, error) {
			cols, rows, err := parquet.ReadCommitted(context.Background(), sink)
			if err != nil {
				return nil, err
			}
			return tiletest.FromRows(cols, rows)
		},
		func() ([]tiletest.Window, error) { return listDirWindows(context.Background(), sink) },
	} {
		got, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if d := tiletest.Diff(oracle, got); d != "" {
			t.Fatalf("final output differs from the oracle:\n%s", d)
		}
	}
	for date := range compacted {
		n, _ := filepath.Glob(filepath.Join(out, "window_date="+date, "*.parquet"))
		if len(n) != 1 {
			t.Fatalf("compacted date %s holds %d files", date, len(n))
		}
	}
}

func renameInto(from, to string) error { return os.Rename(from, to) }

// filesPerDateDir counts the .parquet files of each window_date= directory
// under out, by date.
func filesPerDateDir(out string) map[string]int {
	n := map[string]int{}
	dirs, _ := filepath.Glob(filepath.Join(out, "window_date=*"))
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.parquet"))
		n[strings.TrimPrefix(filepath.Base(d), "window_date=")] = len(files)
	}
	return n
}
