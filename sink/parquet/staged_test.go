package parquet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// backends returns a fresh sink store per backend: the filesystem (hidden
// parts), memory and, when the test server is installed, S3 (versitygw).
func backends(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	m := map[string]func(t *testing.T) objstore.Store{
		"fs":  func(t *testing.T) objstore.Store { return newStore(t) },
		"mem": func(t *testing.T) objstore.Store { return objstore.NewMem() },
	}
	if s3test.Available(t) {
		srv := s3test.Start(t)
		var n atomic.Int64
		m["s3"] = func(t *testing.T) objstore.Store {
			return srv.Store(t, "sink", fmt.Sprintf("run-%d/", n.Add(1)))
		}
	}
	return m
}

// leftovers lists what a finished protocol must not leave: staged parts on
// disk (fs), pending uploads (mem), pending records (all).
func leftovers(t *testing.T, st objstore.Store) []string {
	t.Helper()
	var out []string
	keys, err := st.List(context.Background(), PendingDir)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, keys...)
	switch s := st.(type) {
	case *objstore.FS:
		filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".inprogress") {
				out = append(out, p)
			}
			return nil
		})
	case *objstore.Mem:
		if n := s.PendingUploads(); n > 0 {
			out = append(out, fmt.Sprintf("%d pending uploads", n))
		}
	}
	return out
}

func readVisible(t *testing.T, st objstore.Store) []row.Row {
	t.Helper()
	_, rows, err := ReadAllFiles(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestStagedFilesAppearOnlyAtCommitAndAReRunWithOtherDataLeavesOnlyItsOwn
// is the re-run that reads different data: the first attempt stages files
// and dies before the log entry; a restarted driver (Prepare) aborts them;
// the second attempt's rows are the only ones a directory reader ever sees.
func TestStagedFilesAppearOnlyAtCommitAndAReRunWithOtherDataLeavesOnlyItsOwn(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			b := sink.Batch{QueryID: queryA, ID: 0}
			first := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 7), tileRow("2024-03-02T10:00:00Z", "c2", 1)}
			s1 := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s1.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if _, err := s1.WritePartition(ctx, b, 0, first); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); len(got) != 0 {
				t.Fatalf("staged rows visible before commit: %v", got)
			}
			// The driver dies; a new one starts and the batch re-runs with
			// other rows (records expired under failOnDataLoss: false).
			s2 := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("after restart, the abandoned attempt left %v", l)
			}
			second := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 3)}
			descs, err := s2.WritePartition(ctx, b, 0, second)
			if err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); len(got) != 0 {
				t.Fatalf("staged rows visible before commit: %v", got)
			}
			if err := s2.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); !sameRows(got, second) {
				t.Fatalf("visible after commit = %v, want only the re-run's %v", got, second)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("after commit, left behind: %v", l)
			}
		})
	}
}

// TestAbandonedAttemptOfACommittedBatchIsAbortedAtCommit: two attempts of
// one batch stage files (a slow task of the first attempt); the commit of
// the second aborts the first's uploads at once.
func TestAbandonedAttemptOfACommittedBatchIsAbortedAtCommit(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			s := New(st, tileSchema, Options{})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 4}
			if _, err := s.WritePartition(ctx, b, 1, []row.Row{tileRow("2024-03-01T10:00:00Z", "old", 1)}); err != nil {
				t.Fatal(err)
			}
			want := []row.Row{tileRow("2024-03-01T10:00:00Z", "new", 2)}
			descs, err := s.WritePartition(ctx, b, 1, want)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); !sameRows(got, want) {
				t.Fatalf("visible = %v, want %v", got, want)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// TestRestartCompletesALoggedBatchWhoseCompletionWasCutShort: the log
// entry is durable but the driver died before (or while) completing the
// uploads; a restarted driver finishes it, and finishing twice is fine.
func TestRestartCompletesALoggedBatchWhoseCompletionWasCutShort(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newSt(t)
			faulty := objstore.NewFaulty(inner, objstore.FaultRule{Name: "crash", Op: objstore.OpCompleteMultipart})
			s := New(faulty, tileSchema, Options{PartitionBy: "window_date"})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 0}
			rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 7), tileRow("2024-03-02T10:00:00Z", "c2", 1)}
			descs, err := s.WritePartition(ctx, b, 0, rows)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, b, descs); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("Commit with completion failing = %v, want the injected error", err)
			}
			if got := readVisible(t, inner); len(got) != 0 {
				t.Fatalf("visible before completion: %v", got)
			}
			for i := 0; i < 2; i++ {
				s2 := New(inner, tileSchema, Options{PartitionBy: "window_date"})
				if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
					t.Fatal(err)
				}
				if ok, err := s2.Committed(ctx, 0); !ok || err != nil {
					t.Fatalf("Committed = %v, %v", ok, err)
				}
				// The scheduler finishes a logged batch with Commit(b, nil).
				if err := s2.Commit(ctx, b, nil); err != nil {
					t.Fatal(err)
				}
				if got := readVisible(t, inner); !sameRows(got, rows) {
					t.Fatalf("restart %d: visible = %v, want %v", i, got, rows)
				}
				if _, got, err := ReadCommitted(ctx, inner); err != nil || !sameRows(got, rows) {
					t.Fatalf("restart %d: ReadCommitted = %v, %v", i, got, err)
				}
			}
			if l := leftovers(t, inner); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// recordingFS is the filesystem as a build before staged listing saw it:
// it does not list its staged uploads, so the sink writes pending records.
type recordingFS struct{ *objstore.FS }

func (recordingFS) ListsStaged() bool { return false }

// On a store that lists its staged uploads (the filesystem) a task writes
// no pending-upload record; where it cannot (memory, S3) it writes one
// before any byte. Either way a restart finds and aborts the attempt.
func TestPendingRecordIsWrittenOnlyWhereStagedUploadsCannotBeListed(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			_, listed := objstore.StagedListerOf(st)
			s := New(st, tileSchema, Options{PartitionBy: "window_date"})
			b := sink.Batch{QueryID: queryA, ID: 3}
			descs, err := s.WritePartition(ctx, b, 2, []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 7)})
			if err != nil {
				t.Fatal(err)
			}
			records, err := st.List(ctx, PendingDir)
			if err != nil {
				t.Fatal(err)
			}
			f, _, err := parseStaged(descs[0])
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case listed && (len(records) != 0 || f.Pending != ""):
				t.Fatalf("records %v (descriptor names %q) on a store that lists its staged uploads", records, f.Pending)
			case !listed && (len(records) != 1 || f.Pending != records[0]):
				t.Fatalf("records %v, descriptor names %q: want the one record the descriptor names", records, f.Pending)
			}
			if listed {
				ups, err := st.(objstore.StagedLister).ListStaged(ctx, "")
				if err != nil || len(ups) != 1 || ups[0].UploadID != f.UploadID {
					t.Fatalf("ListStaged = %v, %v; want the one upload %s", ups, err, f.UploadID)
				}
			}
			if err := New(st, tileSchema, Options{PartitionBy: "window_date"}).Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("after restart, the abandoned attempt left %v", l)
			}
		})
	}
}

// Records and staged parts an older build left on a filesystem sink are
// still resolved: a committed attempt's record is deleted with its files
// completed, an abandoned one's upload is aborted at the next start.
func TestPendingRecordsAnOlderBuildLeftOnAFilesystemAreResolved(t *testing.T) {
	ctx := context.Background()
	fs := newStore(t)
	old := New(recordingFS{fs}, tileSchema, Options{})
	committed := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)}
	descs, err := old.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 0}, 0, committed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 1}, 0, []row.Row{tileRow("2024-03-01T10:05:00Z", "c1", 2)}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := fs.List(ctx, PendingDir); len(recs) != 2 {
		t.Fatalf("the older build wrote records %v, want 2", recs)
	}
	s := New(fs, tileSchema, Options{})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	// Neither batch has a log entry: Prepare aborted both attempts and
	// deleted their records.
	if l := leftovers(t, fs); len(l) != 0 {
		t.Fatalf("after Prepare: %v", l)
	}
	descs, err = old.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 0}, 0, committed)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 0}, descs); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, fs); !sameRows(got, committed) {
		t.Fatalf("visible = %v, want %v", got, committed)
	}
	if l := leftovers(t, fs); len(l) != 0 {
		t.Fatalf("after Commit of the older build's files: %v", l)
	}
}

// The listing finds uploads by their file names: another query's staged
// files on a shared (lab) path, and names the sink does not make, are left
// alone by a restart and a commit.
func TestListingSweepTouchesOnlyThisQuerysFiles(t *testing.T) {
	ctx := context.Background()
	fs := newStore(t)
	other := New(fs, tileSchema, Options{})
	theirs := []row.Row{tileRow("2024-03-01T10:00:00Z", "theirs", 1)}
	theirDescs, err := other.WritePartition(ctx, sink.Batch{QueryID: queryB, ID: 0}, 0, theirs)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := fs.CreateMultipart(ctx, "compact-2024-03-01-0001-0000.snappy.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.UploadPart(ctx, "compact-2024-03-01-0001-0000.snappy.parquet", foreign, 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	s := New(fs, tileSchema, Options{})
	if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
		t.Fatal(err)
	}
	mine := []row.Row{tileRow("2024-03-01T10:00:00Z", "mine", 2)}
	descs, err := s.WritePartition(ctx, sink.Batch{QueryID: queryA, ID: 0}, 0, mine)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 0}, descs); err != nil {
		t.Fatal(err)
	}
	ups, err := fs.ListStaged(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{foreign: true}
	for _, d := range theirDescs {
		f, _, _ := parseStaged(d)
		want[f.UploadID] = true
	}
	if len(ups) != len(want) {
		t.Fatalf("staged after queryA's restart and commit: %v, want queryB's and the foreign upload only", ups)
	}
	for _, u := range ups {
		if !want[u.UploadID] {
			t.Fatalf("staged after queryA's commit: %v, want queryB's and the foreign upload only", ups)
		}
	}
	if err := other.Commit(ctx, sink.Batch{QueryID: queryB, ID: 0}, theirDescs); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, fs); !sameRows(got, append(append([]row.Row(nil), mine...), theirs...)) {
		t.Fatalf("visible = %v, want both queries' rows", got)
	}
}

// Commit deletes the pending records of the attempt it logs without
// reading them (the descriptors name them), and reads only the others: an
// abandoned attempt's record, whose upload it aborts.
func TestCommitDeletesItsOwnRecordsUnreadAndAbortsAnAbandonedAttempt(t *testing.T) {
	for name, newSt := range backends(t) {
		if name == "fs" {
			continue // no records: TestListingSweepTouchesOnlyThisQuerysFiles
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newSt(t)
			st := objstore.NewCounting(inner)
			s := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 5}
			if _, err := s.WritePartition(ctx, b, 0, []row.Row{tileRow("2024-03-01T10:00:00Z", "abandoned", 1)}); err != nil {
				t.Fatal(err)
			}
			var descs []string
			var want []row.Row
			for p := range ids.PartitionID(3) {
				rows := []row.Row{tileRow("2024-03-01T10:00:00Z", fmt.Sprintf("c%d", p), 1), tileRow("2024-03-02T10:00:00Z", fmt.Sprintf("c%d", p), 2)}
				d, err := s.WritePartition(ctx, b, p, rows)
				if err != nil {
					t.Fatal(err)
				}
				descs, want = append(descs, d...), append(want, rows...)
			}
			st.StartTrace()
			if err := s.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			st.StopTrace()
			var gets []string
			for _, e := range st.Trace() {
				if e.Op == objstore.OpGet && strings.HasPrefix(e.Key, PendingDir) {
					gets = append(gets, e.Key)
				}
			}
			if len(gets) != 1 || !strings.HasPrefix(gets[0], PendingDir+"5/0000-") {
				t.Fatalf("Commit read the pending records %v; want only the abandoned attempt's (partition 0)", gets)
			}
			if got := readVisible(t, st); !sameRows(got, want) {
				t.Fatalf("visible = %v, want %v", got, want)
			}
			if l := leftovers(t, inner); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// The logged attempt's records are deleted once its uploads are complete.
// If that fails (or a crash comes first), the batch is committed all the
// same, and the next start completes its uploads again (idempotent) and
// deletes the records: the files appear once.
func TestRecordsLeftByACommittedBatchAreResolvedByTheNextStart(t *testing.T) {
	for name, newSt := range backends(t) {
		if name == "fs" {
			continue // no records
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newSt(t)
			// Faulty has no DeleteMany: the records go by Delete, which fails.
			st := objstore.NewFaulty(inner, objstore.FaultRule{Name: "lost", KeyPrefix: PendingDir, Op: objstore.OpDelete})
			s := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 2}
			rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 7), tileRow("2024-03-02T10:00:00Z", "c2", 1)}
			descs, err := s.WritePartition(ctx, b, 0, rows)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			if recs, _ := inner.List(ctx, PendingDir); len(recs) != 1 {
				t.Fatalf("records after a commit whose deletes failed: %v, want the attempt's one", recs)
			}
			s2 := New(inner, tileSchema, Options{PartitionBy: "window_date"})
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, inner); !sameRows(got, rows) {
				t.Fatalf("visible = %v, want %v once", got, rows)
			}
			if l := leftovers(t, inner); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// A batch that emits nothing (most no-data batches) costs its log entry
// and nothing else on a prepared sink: no lookup of its other form, no
// listing of pending records. A re-run's finish of a batch logged before
// the start still finds and completes its entry.
func TestEmptyBatchCostsOnlyItsLogEntry(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newSt(t)
			st := objstore.NewCounting(inner)
			s := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := s.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			rows := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 1)}
			b0 := sink.Batch{QueryID: queryA, ID: 0}
			descs, err := s.WritePartition(ctx, b0, 0, rows)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, b0, descs); err != nil {
				t.Fatal(err)
			}
			st.StartTrace()
			if err := s.Commit(ctx, sink.Batch{QueryID: queryA, ID: 1}, nil); err != nil {
				t.Fatal(err)
			}
			st.StopTrace()
			var ops []string
			for _, e := range st.Trace() {
				ops = append(ops, e.String())
			}
			if len(ops) != 1 || !strings.HasPrefix(ops[0], objstore.OpPutIfAbsent+" "+LogDir+"1 ") {
				t.Fatalf("an empty batch's Commit made %v, want only its log entry", ops)
			}
			// Batch 2 is logged with a file and its completion is cut
			// short; a restarted sink's finish (Commit(b, nil)) completes it.
			b2 := sink.Batch{QueryID: queryA, ID: 2}
			more := []row.Row{tileRow("2024-03-01T10:05:00Z", "c1", 2)}
			cut := New(objstore.NewFaulty(inner, objstore.FaultRule{Op: objstore.OpCompleteMultipart}), tileSchema, Options{PartitionBy: "window_date"})
			if err := cut.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			descs, err = cut.WritePartition(ctx, b2, 0, more)
			if err != nil {
				t.Fatal(err)
			}
			if err := cut.Commit(ctx, b2, descs); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("Commit with the completion failing = %v", err)
			}
			s2 := New(inner, tileSchema, Options{PartitionBy: "window_date"})
			if err := s2.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			if err := s2.Commit(ctx, b2, nil); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, inner); !sameRows(got, append(rows, more...)) {
				t.Fatalf("visible = %v, want %v", got, append(rows, more...))
			}
			if l := leftovers(t, inner); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}

// Committed does not read a batch newer than the log (the usual batch
// about to run). If a fenced driver logged it meanwhile, this driver's
// tasks stage files too; its Commit finds the logged entry, completes that
// entry's uploads and aborts its own: the rows appear once.
func TestBatchLoggedByAFencedDriverAfterPrepareIsFinishedFromItsEntry(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newSt(t)
			mine := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := mine.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			fenced := New(st, tileSchema, Options{PartitionBy: "window_date"})
			if err := fenced.Prepare(ctx, queryA, query.Lab); err != nil {
				t.Fatal(err)
			}
			b := sink.Batch{QueryID: queryA, ID: 0}
			theirs := []row.Row{tileRow("2024-03-01T10:00:00Z", "c1", 7)}
			descs, err := fenced.WritePartition(ctx, b, 0, theirs)
			if err != nil {
				t.Fatal(err)
			}
			if err := fenced.Commit(ctx, b, descs); err != nil {
				t.Fatal(err)
			}
			if done, err := mine.Committed(ctx, 0); err != nil || done {
				t.Fatalf("Committed(0) = %v, %v: want false, unread (newer than the log at Prepare)", done, err)
			}
			own, err := mine.WritePartition(ctx, b, 0, theirs)
			if err != nil {
				t.Fatal(err)
			}
			if err := mine.Commit(ctx, b, own); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, st); !sameRows(got, theirs) {
				t.Fatalf("visible = %v, want %v once", got, theirs)
			}
			if done, err := mine.Committed(ctx, 0); err != nil || !done {
				t.Fatalf("Committed(0) after Commit = %v, %v", done, err)
			}
			if l := leftovers(t, st); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}
