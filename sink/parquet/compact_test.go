package parquet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// batchRows is batch n's output in the compaction tests: every third batch
// is empty (a no-data batch), the others emit one or two windows of a day
// that moves forward every ten batches.
func batchRows(n int64) []row.Row {
	if n%3 == 2 {
		return nil
	}
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n/10) * 24 * time.Hour)
	start := day.Add(time.Duration(n%10) * 5 * time.Minute).Format(time.RFC3339)
	rows := []row.Row{tileRow(start, fmt.Sprintf("c%d", n), n+1)}
	if n%2 == 0 {
		rows = append(rows, tileRow(start, fmt.Sprintf("d%d", n), 2*n+1))
	}
	return rows
}

// runBatches commits batches from..to-1 through s as the driver does
// (Committed, then the reduce task's WritePartition, then Commit), on two
// partitions, and returns the rows written: the oracle.
func runBatches(t *testing.T, s *Sink, from, to ids.BatchID) []row.Row {
	t.Helper()
	ctx := context.Background()
	var all []row.Row
	for n := from; n < to; n++ {
		done, err := s.Committed(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			t.Fatalf("batch %d committed before it ran", n)
		}
		rows := batchRows(int64(n))
		b := sink.Batch{QueryID: queryA, ID: n}
		var descs []string
		for p, part := range [][]row.Row{rows[:min(1, len(rows))], rows[min(1, len(rows)):]} {
			d, err := s.WritePartition(ctx, b, ids.PartitionID(p), part)
			if err != nil {
				t.Fatal(err)
			}
			descs = append(descs, d...)
		}
		if err := s.Commit(ctx, b, descs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	return all
}

func logKeysOf(t *testing.T, st objstore.Store) []string {
	t.Helper()
	keys, err := st.List(context.Background(), LogDir)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, LogDir)
	}
	slices.SortFunc(keys, func(a, b string) int {
		var x, y int
		fmt.Sscan(strings.TrimSuffix(a, compactSuffix), &x)
		fmt.Sscan(strings.TrimSuffix(b, compactSuffix), &y)
		return x - y
	})
	return keys
}

// checkReaders asserts that both readers return exactly the oracle's rows
// and that the log lists exactly the files in the directory.
func checkReaders(t *testing.T, st objstore.Store, want []row.Row) {
	t.Helper()
	ctx := context.Background()
	_, got, err := ReadCommitted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, want) {
		t.Fatalf("ReadCommitted: %d rows, want the %d written", len(got), len(want))
	}
	if got := readVisible(t, st); !sameRows(got, want) {
		t.Fatalf("directory listing: %d rows, want the %d written", len(got), len(want))
	}
	entries, err := LogEntries(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	seen := map[ids.BatchID]bool{}
	for _, e := range entries {
		if seen[e.BatchID] {
			t.Fatalf("LogEntries has batch %d twice", e.BatchID)
		}
		seen[e.BatchID] = true
		logged = append(logged, e.Files...)
		for _, f := range e.Files {
			if !strings.Contains(f, fmt.Sprintf("part-%05d-", e.BatchID)) {
				t.Fatalf("batch %d lists %s", e.BatchID, f)
			}
		}
	}
	slices.Sort(logged)
	files, err := ListDirectory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged, files) {
		t.Fatalf("the log lists %d files, the directory holds %d:\n%v\n%v", len(logged), len(files), logged, files)
	}
}

// TestSinkLogCompactsEveryIntervalAndDeletesOldEntries runs 35 batches
// with compactInterval 10 and minBatchesToRetain 5: the log ends with the
// compacted entries 19 and 29 and the entries after 19, the readers return
// exactly the rows written, and a restarted driver resumes at batch 35
// reading a bounded number of objects.
func TestSinkLogCompactsEveryIntervalAndDeletesOldEntries(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			opts := Options{PartitionBy: "window_date", CompactInterval: 10, MinBatchesToRetain: 5}
			s := New(st, tileSchema, opts)
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			want := runBatches(t, s, 0, 35)
			s.Wait()
			// After batch 29: keep from 29-5+1 = 25, whose compacted
			// entry is 19; everything before 19 is deleted. Batch 34 is
			// no compacted entry and starts no cleanup.
			var wantKeys []string
			for n := 19; n < 35; n++ {
				k := fmt.Sprint(n)
				if n == 19 || n == 29 {
					k += compactSuffix
				}
				wantKeys = append(wantKeys, k)
			}
			if got := logKeysOf(t, st); !slices.Equal(got, wantKeys) {
				t.Fatalf("log holds %v, want %v", got, wantKeys)
			}
			checkReaders(t, st, want)
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}

			// A restart: every batch so far is committed (those cleanup
			// deleted too), the next is not; start-up reads a bounded
			// number of objects.
			counting := objstore.NewCounting(st)
			s2 := New(counting, tileSchema, opts)
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if done, err := s2.Committed(ctx, 35); err != nil || done {
				t.Fatalf("Committed(35) after restart = %v, %v; want false", done, err)
			}
			stats := counting.Stats()
			if gets, lists := stats[objstore.OpGet].Requests, stats[objstore.OpList].Requests; gets > 4 || lists > 4 {
				t.Fatalf("restart read %d objects and listed %d times; want a bounded handful", gets, lists)
			}
			for _, n := range []ids.BatchID{0, 7, 18, 19, 25, 34} {
				if done, err := s2.Committed(ctx, n); err != nil || !done {
					t.Fatalf("Committed(%d) after restart = %v, %v; want true", n, done, err)
				}
			}
			// A re-run of the last batch finishes its commit and changes
			// nothing; the query goes on.
			if err := s2.Commit(ctx, sink.Batch{QueryID: queryA, ID: 34}, nil); err != nil {
				t.Fatal(err)
			}
			want = append(want, runBatches(t, s2, 35, 41)...)
			s2.Wait()
			// After batch 39: keep from 35, compacted entry 29.
			if got := logKeysOf(t, st); got[0] != "29"+compactSuffix || got[len(got)-1] != "40" || !slices.Contains(got, "39"+compactSuffix) {
				t.Fatalf("log after batch 40 holds %v", got)
			}
			checkReaders(t, st, want)
		})
	}
}

// TestStartUpReadsTheSameWhateverTheQueryLength: the objects a restart
// reads do not grow with the number of batches the query has run.
func TestStartUpReadsTheSameWhateverTheQueryLength(t *testing.T) {
	ctx := context.Background()
	cost := func(batches ids.BatchID) (int64, int64) {
		st := objstore.NewMem()
		opts := Options{PartitionBy: "window_date", CompactInterval: 10, MinBatchesToRetain: 20}
		s := New(st, tileSchema, opts)
		if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
			t.Fatal(err)
		}
		runBatches(t, s, 0, batches)
		s.Wait()
		counting := objstore.NewCounting(st)
		s2 := New(counting, tileSchema, opts)
		if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
			t.Fatal(err)
		}
		if done, err := s2.Committed(ctx, batches); err != nil || done {
			t.Fatalf("Committed(%d) = %v, %v", batches, done, err)
		}
		keys, _ := st.List(ctx, LogDir)
		if len(keys) > 20+2*10 {
			t.Fatalf("after %d batches the log holds %d entries", batches, len(keys))
		}
		return counting.Stats()[objstore.OpGet].Requests, counting.Stats()[objstore.OpList].Requests
	}
	g1, l1 := cost(45)
	g2, l2 := cost(405)
	t.Logf("restart (Prepare, then Committed of the next batch): %d gets and %d lists after 45 batches, %d and %d after 405", g1, l1, g2, l2)
	if g1 != g2 || l1 != l2 {
		t.Fatalf("restart after 45 batches: %d gets, %d lists; after 405: %d gets, %d lists; want the same", g1, l1, g2, l2)
	}
}

// TestLogWrittenBeforeCompactionIsReadAndCompactedOnce: a log of plain
// entries only (an older build) is read as is; the first compacted entry
// folds the whole history in, cleanup deletes it, and the rows stay.
func TestLogWrittenBeforeCompactionIsReadAndCompactedOnce(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	old := New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 1000})
	if err := old.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, old, 0, 25)
	if keys := logKeysOf(t, st); len(keys) != 25 || slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, compactSuffix) }) {
		t.Fatalf("old log = %v", keys)
	}
	checkReaders(t, st, want)
	s := New(st, tileSchema, Options{PartitionBy: "window_date", CompactInterval: 10, MinBatchesToRetain: 3})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want = append(want, runBatches(t, s, 25, 31)...)
	s.Wait()
	if keys := logKeysOf(t, st); len(keys) != 31 || keys[29] != "29"+compactSuffix {
		t.Fatalf("log after the first compacted entry = %v, want 0..28, 29.compact, 30 (28 is within minBatchesToRetain)", keys)
	}
	checkReaders(t, st, want)
	want = append(want, runBatches(t, s, 31, 41)...)
	s.Wait()
	keys := logKeysOf(t, st)
	if keys[0] != "29"+compactSuffix || len(keys) != 12 {
		t.Fatalf("log after batch 40 = %v, want 29.compact, 30..38, 39.compact, 40", keys)
	}
	checkReaders(t, st, want)
	for _, n := range []ids.BatchID{0, 24, 29, 30} {
		if done, err := s.Committed(ctx, n); err != nil || !done {
			t.Fatalf("Committed(%d) = %v, %v", n, done, err)
		}
	}
}

// TestCompactedBatchReRunKeepsTheLoggedFiles: a compacted batch whose
// re-run reads other data keeps the files its entry logged, as a plain
// entry does.
func TestCompactedBatchReRunKeepsTheLoggedFiles(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	opts := Options{PartitionBy: "window_date", CompactInterval: 5}
	s := New(st, tileSchema, opts)
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, s, 0, 5)
	// Batch 4 (compacted) runs again with other rows: the log wins.
	b := sink.Batch{QueryID: queryA, ID: 4}
	descs, err := s.WritePartition(ctx, b, 0, []row.Row{tileRow("2024-03-09T00:00:00Z", "zz", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, b, descs); err != nil {
		t.Fatal(err)
	}
	checkReaders(t, st, want)
}

// A compacted entry folds the entries since the last compacted one; those
// this sink wrote are folded from memory, without a read each (S3: a GET
// each). The readers see the same log.
func TestCompactedEntryFoldsTheEntriesThisSinkWroteWithoutReadingThem(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	st := objstore.NewCounting(inner)
	s := New(st, tileSchema, Options{CompactInterval: 10})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want := runBatches(t, s, 0, 19)
	st.StartTrace()
	want = append(want, runBatches(t, s, 19, 20)...)
	st.StopTrace()
	var reads []string
	for _, e := range st.Trace() {
		if e.Op == objstore.OpGet && strings.HasPrefix(e.Key, LogDir) {
			reads = append(reads, e.Key)
		}
	}
	if len(reads) != 0 {
		t.Errorf("batch 19 (compacted) read %v from the log, want nothing", reads)
	}
	s.Wait()
	checkReaders(t, inner, want)
	// A restarted sink has nothing cached: it reads them.
	s2 := New(st, tileSchema, Options{CompactInterval: 10})
	if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	want = append(want, runBatches(t, s2, 20, 30)...)
	s2.Wait()
	checkReaders(t, inner, want)
}
