package parquet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// windowKey identifies a window's row in the compaction tests.
func windowKey(r row.Row) string { return fmt.Sprint(r[0].I, "/", r[2].S) }

// listerRead is a reader that lists the directory and reads what it
// found, listing again when a file is gone by the time it opens it.
func listerRead(ctx context.Context, st objstore.Store) ([]row.Row, error) {
	for attempt := 0; ; attempt++ {
		files, err := ListDirectory(ctx, st)
		if err != nil {
			return nil, err
		}
		_, rows, err := readFiles(ctx, st, files)
		if errors.Is(err, objstore.ErrNotExist) && attempt < 100 {
			continue
		}
		return rows, err
	}
}

// checkSnapshot: every window at most once, each as the oracle has it, and
// every window of mustHave there. Duplicates are counted, not failed, when
// allowDup (an S3 lister between completion and deletion).
func checkSnapshot(rows []row.Row, oracle map[string]string, mustHave []row.Row) (dups int, err error) {
	seen := map[string]bool{}
	for _, r := range rows {
		k := windowKey(r)
		if seen[k] {
			dups++
			continue
		}
		seen[k] = true
		if oracle[k] != rowKey(r) {
			return dups, fmt.Errorf("window %s reads %s, want %s", k, rowKey(r), oracle[k])
		}
	}
	for _, r := range mustHave {
		if !seen[windowKey(r)] {
			return dups, fmt.Errorf("window %s is missing", windowKey(r))
		}
	}
	return dups, nil
}

func filesPerDate(t *testing.T, st objstore.Store) map[string]int {
	t.Helper()
	files, err := ListDirectory(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, f := range files {
		dir, _, _ := strings.Cut(f, "/")
		n[strings.TrimPrefix(dir, "window_date=")]++
	}
	return n
}

// TestCompactClosedDatesWhileReadersPollAndTheQueryRuns: 40 batches write
// four dates; while the query keeps committing (later dates) and two
// readers poll (one follows the log, one lists the directory), every
// closed date is compacted. Every snapshot has each window exactly once
// (an S3 lister may see a window twice between the completion of the new
// files and the deletion of the old: counted, and the log reader never
// does); the file count drops to one per closed date; the rows equal the
// oracle before and after; the query's next compacted log entry folds the
// replacements in and cleanup deletes their records.
func TestCompactClosedDatesWhileReadersPollAndTheQueryRuns(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			opts := Options{PartitionBy: "window_date", CompactInterval: 5, MinBatchesToRetain: 5}
			s := New(st, tileSchema, opts)
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			before := runBatches(t, s, 0, 40) // 2024-03-01 .. 2024-03-04
			oracle := map[string]string{}
			for n := int64(0); n < 70; n++ {
				for _, r := range batchRows(n) {
					oracle[windowKey(r)] = rowKey(r)
				}
			}
			if _, got, err := ReadCommitted(ctx, st); err != nil || !sameRows(got, before) {
				t.Fatalf("before: %d rows (%v), want %d", len(got), err, len(before))
			}
			filesBefore := filesPerDate(t, st)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var snaps, listerDups atomic.Int64
			errs := make(chan error, 4)
			poll := func(name string, read func() ([]row.Row, error), allowDup bool) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					rows, err := read()
					if err != nil {
						errs <- fmt.Errorf("%s: %w", name, err)
						return
					}
					dups, err := checkSnapshot(rows, oracle, before)
					if err == nil && dups > 0 && !allowDup {
						err = fmt.Errorf("%d windows twice", dups)
					}
					if err != nil {
						errs <- fmt.Errorf("%s snapshot: %w", name, err)
						return
					}
					listerDups.Add(int64(dups))
					snaps.Add(1)
				}
			}
			wg.Add(3)
			go poll("log reader", func() ([]row.Row, error) { _, r, err := ReadCommitted(ctx, st); return r, err }, false)
			go poll("directory lister", func() ([]row.Row, error) { return listerRead(ctx, st) }, name != "fs")
			var after []row.Row
			go func() {
				defer wg.Done()
				after = runBatches(t, s, 40, 58) // the query goes on: 2024-03-05, 06
			}()
			// The committed watermark: every window of 03-01..03-03 has
			// ended (5-minute windows); 03-04 has not.
			wm := eventtime.Watermark(time.Date(2024, 3, 4, 0, 5, 0, 0, time.UTC).UnixMicro())
			// At each step of each replacement, both readers take a
			// snapshot too: the states in between, for certain.
			steps := map[string]int{}
			stepDups := map[string]int{}
			step := func(stage string) {
				steps[stage]++
				_, logged, err := ReadCommitted(ctx, st)
				if err != nil {
					t.Errorf("log reader after %s: %v", stage, err)
					return
				}
				if dups, err := checkSnapshot(logged, oracle, before); err != nil || dups > 0 {
					t.Errorf("log reader after %s: %v, %d windows twice", stage, err, dups)
				}
				listed, err := listerRead(ctx, st)
				if err != nil {
					t.Errorf("lister after %s: %v", stage, err)
					return
				}
				dups, err := checkSnapshot(listed, oracle, before)
				if err != nil {
					t.Errorf("lister after %s: %v", stage, err)
				}
				stepDups[stage] += dups
			}
			res, err := CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm, step: step})
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if snaps.Load() == 0 {
				t.Fatal("no reader snapshot taken")
			}
			t.Logf("%d snapshots, %d windows seen twice by the lister; steps %v, windows twice by step %v", snaps.Load(), listerDups.Load(), steps, stepDups)
			if steps["recorded"] != 3 || steps["visible"] != 3 || steps["deleted"] != 3 {
				t.Fatalf("steps %v, want each three times", steps)
			}
			// The filesystem exchanges directories: a lister never sees
			// both sets. An object store has no rename: between the
			// completion of the new files and the deletion of the old, a
			// lister sees both (the log reader does not).
			if name == "fs" && len(stepDups) > 0 && stepDups["visible"] > 0 {
				t.Fatalf("fs lister saw windows twice: %v", stepDups)
			}
			if name != "fs" && stepDups["visible"] == 0 {
				t.Fatalf("an object-store lister saw no window twice between completion and deletion: %v (the test lost its power)", stepDups)
			}
			var compacted []string
			for _, r := range res {
				if r.Skipped == "" {
					compacted = append(compacted, r.Date)
				}
			}
			if want := []string{"2024-03-01", "2024-03-02", "2024-03-03"}; !slices.Equal(compacted, want) {
				t.Fatalf("compacted %v (%+v), want %v", compacted, res, want)
			}
			filesAfter := filesPerDate(t, st)
			for _, d := range compacted {
				if filesAfter[d] != 1 || filesBefore[d] < 3 {
					t.Fatalf("%s: %d files before, %d after; want many, then 1", d, filesBefore[d], filesAfter[d])
				}
			}
			if filesAfter["2024-03-04"] != filesBefore["2024-03-04"] {
				t.Fatalf("the open date changed: %d files, was %d", filesAfter["2024-03-04"], filesBefore["2024-03-04"])
			}
			all := append(slices.Clone(before), after...)
			checkCompacted(t, st, all)

			// Again: nothing to do.
			res, err = CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Skipped == "" {
					t.Fatalf("second run compacted %+v", r)
				}
			}
			// The query's next compacted entries fold the replacements
			// in; cleanup deletes their records.
			all = append(all, runBatches(t, s, 58, 70)...)
			s.Wait()
			if keys := logKeysOf(t, st); slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, replacePrefix) }) {
				t.Fatalf("replacement records left after two compacted entries: %v", keys)
			}
			checkCompacted(t, st, all)
			// A restart reads the folded log.
			s2 := New(st, tileSchema, opts)
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if done, err := s2.Committed(ctx, 70); err != nil || done {
				t.Fatalf("Committed(70) = %v, %v", done, err)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// checkCompacted: both readers return exactly want, and the log lists
// exactly the directory's files.
func checkCompacted(t *testing.T, st objstore.Store, want []row.Row) {
	t.Helper()
	ctx := context.Background()
	_, got, err := ReadCommitted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, want) {
		t.Fatalf("log reader: %d rows, want %d", len(got), len(want))
	}
	listed, err := listerRead(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(listed, want) {
		t.Fatalf("directory lister: %d rows, want %d", len(listed), len(want))
	}
	entries, err := LogEntries(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, e := range entries {
		logged = append(logged, e.Files...)
	}
	slices.Sort(logged)
	files, err := ListDirectory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged, files) {
		t.Fatalf("the log lists %v, the directory holds %v", logged, files)
	}
}

// TestInterruptedCompactionIsFinishedByTheNextRun: the compactor dies
// after writing its record, or after the new files became visible; readers
// that follow the log still see each window once, and the next run
// finishes the swap.
func TestInterruptedCompactionIsFinishedByTheNextRun(t *testing.T) {
	for name, newSt := range backends(t) {
		for _, crashAt := range []string{"recorded", "visible"} {
			t.Run(name+"/"+crashAt, func(t *testing.T) {
				ctx := context.Background()
				st := newSt(t)
				s := New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 5})
				if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
					t.Fatal(err)
				}
				want := runBatches(t, s, 0, 20)
				oracle := map[string]string{}
				for _, r := range want {
					oracle[windowKey(r)] = rowKey(r)
				}
				wm := eventtime.Watermark(time.Date(2024, 3, 3, 0, 5, 0, 0, time.UTC).UnixMicro())
				crash := fmt.Errorf("crash at %s", crashAt)
				func() {
					defer func() {
						if r := recover(); r != crash {
							t.Fatalf("recovered %v, want the crash", r)
						}
					}()
					CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm, step: func(s string) {
						if s == crashAt {
							panic(crash)
						}
					}})
				}()
				_, rows, err := ReadCommitted(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				if dups, err := checkSnapshot(rows, oracle, want); err != nil || dups > 0 || len(rows) != len(want) {
					t.Fatalf("log reader after the crash: %v, %d windows twice, %d rows of %d", err, dups, len(rows), len(want))
				}
				res, err := CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("second run: %+v", res)
				lk, err := listLog(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range lk.primary.replacements {
					r, err := readReplacement(ctx, st, logLayout{prefix: LogDir}, id)
					if err != nil || r.State != StateDone {
						t.Fatalf("replacement %s: %v, state %v", id, err, r)
					}
				}
				if got := filesPerDate(t, st); got["2024-03-01"] != 1 || got["2024-03-02"] != 1 {
					t.Fatalf("files per date after the second run: %v", got)
				}
				checkCompacted(t, st, want)
				if fs, ok := st.(*objstore.FS); ok {
					if left, _ := filepath.Glob(filepath.Join(fs.Root(), "_sink_compact", "*")); len(left) != 0 {
						t.Fatalf("staging left behind: %v", left)
					}
				}
			})
		}
	}
}

// TestCompactClosedDatesPolicyRunsAfterCompactedEntries: with
// Options.ClosedWatermark set, the driver's sink compacts every date the
// watermark has closed in the background, as the query goes on.
func TestCompactClosedDatesPolicyRunsAfterCompactedEntries(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	var s *Sink
	s = New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 5, MinBatchesToRetain: 5,
		ClosedWatermark: func(context.Context) (eventtime.Watermark, error) {
			// The watermark of the tile in batchRows: the current day's
			// first window has closed; every earlier day is over.
			s.mu.Lock()
			n := s.newest
			s.mu.Unlock()
			day := time.Date(2024, 3, 1, 0, 5, 0, 0, time.UTC).Add(time.Duration(n/10) * 24 * time.Hour)
			return eventtime.Watermark(day.UnixMicro()), nil
		}})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, s, 0, 45)
	s.Wait()
	got := filesPerDate(t, st)
	for _, d := range []string{"2024-03-01", "2024-03-02", "2024-03-03"} {
		if got[d] != 1 {
			t.Fatalf("closed date %s holds %d files (%v)", d, got[d], got)
		}
	}
	if got["2024-03-05"] < 2 {
		t.Fatalf("the open date 2024-03-05 was compacted: %v", got)
	}
	checkCompacted(t, st, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOneCompactionAtATime: a run holding the lease makes another refuse,
// naming the holder; a lease older than its TTL is taken over; a finished
// run releases it.
func TestOneCompactionAtATime(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	s := New(st, tileSchema, Options{PartitionBy: "window_date"})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, s, 0, 20)
	wm := eventtime.Watermark(time.Date(2024, 3, 3, 0, 5, 0, 0, time.UTC).UnixMicro())
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	release, err := acquireLease(ctx, st, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm, Now: func() time.Time { return now.Add(time.Minute) }})
	if !errors.Is(err, ErrCompactionRunning) || !strings.Contains(err.Error(), LockKey) {
		t.Fatalf("second run: %v, want ErrCompactionRunning naming %s", err, LockKey)
	}
	// The holder died: an hour later the lease is taken over.
	res, err := CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm, Now: func() time.Time { return now.Add(61 * time.Minute) }})
	if err != nil || len(res) != 2 || res[0].Skipped != "" || res[1].Skipped != "" {
		t.Fatalf("after the TTL: %+v, %v", res, err)
	}
	if _, err := st.Get(ctx, LockKey); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("the lease is left behind: %v", err)
	}
	release() // the old holder's release leaves the new state alone
	checkCompacted(t, st, want)
}

// TestCompactionReadsADateInBoundedPieces: with a small MaxRowsPerFile a
// date becomes several files of at most that many rows, each sorted by
// window; rows are identical; and each new file reads only the old files
// its rows come from (a first pass reads each once to count), so memory
// is bounded by MaxRowsPerFile rows and one old file, not by the date.
func TestCompactionReadsADateInBoundedPieces(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewCounting(objstore.NewMem())
	s := New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 5, MinBatchesToRetain: 5})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, s, 0, 40) // 2024-03-01 .. 2024-03-04
	s.Wait()
	oldFiles := map[string]bool{}
	files, err := ListDirectory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		oldFiles[f] = true
	}
	const maxRows = 3
	wm := eventtime.Watermark(time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC).UnixMicro())
	st.StartTrace()
	res, err := CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm, MaxRowsPerFile: maxRows})
	st.StopTrace()
	if err != nil {
		t.Fatal(err)
	}
	var filesBefore, chunks int
	for _, r := range res {
		if r.Skipped != "" {
			t.Fatalf("date %s skipped: %s", r.Date, r.Skipped)
		}
		if want := (r.Rows + maxRows - 1) / maxRows; r.FilesAfter != want || want < 2 {
			t.Fatalf("%s: %d rows into %d files, want %d (and at least 2)", r.Date, r.Rows, r.FilesAfter, want)
		}
		filesBefore += r.FilesBefore
		chunks += r.FilesAfter
	}
	checkCompacted(t, st, want)
	gets := 0
	for _, e := range st.Trace() {
		if e.Op == objstore.OpGet && oldFiles[e.Key] {
			gets++
		}
	}
	// One read per old file to count, then each new file reads the old
	// files holding its rows: each old file once, plus one more for each
	// new file that starts inside a file. A compaction that read a whole
	// date for every new file would read about filesBefore*chunks/dates.
	if gets > 2*filesBefore+chunks {
		t.Fatalf("%d reads of the %d old files for %d new files: more than each new file's own rows need", gets, filesBefore, chunks)
	}
	t.Logf("%d dates, %d old files, %d new files, %d reads of old files", len(res), filesBefore, chunks, gets)
	files, err = ListDirectory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		cols, rows, err := readFiles(ctx, st, []string{f})
		if err != nil {
			t.Fatal(err)
		}
		ws := slices.IndexFunc(cols, func(c query.Column) bool { return c.Name == query.WindowStart })
		if len(rows) > maxRows || !slices.IsSortedFunc(rows, func(a, b row.Row) int { return compareRows(a, b, ws) }) {
			t.Fatalf("%s: %d rows (at most %d), sorted %v", f, len(rows), maxRows, slices.IsSortedFunc(rows, func(a, b row.Row) int { return compareRows(a, b, ws) }))
		}
	}
}

// EachCommitted hands over the rows ReadCommitted returns, in the same
// order, one committed file at a time (before and after a compaction of
// closed dates), so `driver sink cat` holds one file's rows, not the sink.
func TestEachCommittedIsReadCommittedOneFileAtATime(t *testing.T) {
	ctx := context.Background()
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := newSt(t)
			s := New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 5, MinBatchesToRetain: 5})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			runBatches(t, s, 0, 40)
			s.Wait()
			check := func(when string) {
				_, want, err := ReadCommitted(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				var got []row.Row
				calls := 0
				if err := EachCommitted(ctx, st, func(_ []query.Column, rows []row.Row) error {
					calls++
					got = append(got, rows...)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				files, err := ListDirectory(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				if calls != len(files) || len(got) != len(want) {
					t.Fatalf("%s: %d calls for %d files, %d rows for %d", when, calls, len(files), len(got), len(want))
				}
				for i := range want {
					if rowKey(got[i]) != rowKey(want[i]) {
						t.Fatalf("%s: row %d is %v, ReadCommitted's %v", when, i, got[i], want[i])
					}
				}
			}
			check("before compaction")
			wm := eventtime.Watermark(time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC).UnixMicro())
			if _, err := CompactDates(ctx, st, CompactOptions{QueryID: queryA, Watermark: wm}); err != nil {
				t.Fatal(err)
			}
			check("after compaction")
		})
	}
}
