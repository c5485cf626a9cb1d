package microbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/jsonbatches"
	"github.com/sluicehq/sluice/sink/parquet"
)

// run builds and runs spec to completion, returning its progress reports.
func run(t *testing.T, spec query.Spec, opts microbatch.Options) []*progress.Report {
	t.Helper()
	var mu sync.Mutex
	var reports []*progress.Report
	opts.Observer = progress.Committed(func(p *progress.Report) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	})
	job, err := microbatch.Build(context.Background(), spec, opts)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	defer job.Close()
	if err := job.Run(context.Background(), nil); err != nil {
		t.Fatalf("run: %v", err)
	}
	return reports
}

type crash struct{ point string }

// runUntilCrash runs spec with a hook that aborts the run (a panic, as a
// process death would) at point of batch. Only points reached on the
// driver's goroutine can be simulated this way (after-offsets, maps-done,
// before-sink-commit, after-sink-commit, after-commit); e2e kills a real
// process at every point.
func runUntilCrash(t *testing.T, spec query.Spec, point string, batch ids.BatchID) {
	t.Helper()
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{Hook: func(p string, b ids.BatchID) {
		if p == point && b == batch {
			panic(crash{p})
		}
	}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	defer job.Close()
	defer func() {
		r := recover()
		if _, ok := r.(crash); !ok {
			if r != nil {
				panic(r)
			}
			t.Fatalf("run finished without reaching %s of batch %d", point, batch)
		}
	}()
	_ = job.Run(context.Background(), nil)
}

func writeLines(t testing.TB, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ev(id, course, ts string) string {
	return fmt.Sprintf(`{"event_id":%q,"course_id":%q,"lesson_id":"l1","event_time":%q}`, id, course, ts)
}

func sinkWindows(t *testing.T, path string, followLog bool) []tiletest.Window {
	t.Helper()
	store, err := objstore.NewFS(path)
	if err != nil {
		t.Fatal(err)
	}
	var cols []query.Column
	var rows []row.Row
	if followLog {
		cols, rows, err = parquet.ReadCommitted(context.Background(), store)
	} else {
		cols, rows, err = parquet.ReadAllFiles(context.Background(), store)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return nil
	}
	ws, err := tiletest.FromRows(cols, rows)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// The seed's lab: two events in one five-minute window and one thirty
// minutes later. The first window appears only because the later event
// moved the watermark; a second availableNow adds nothing; after the
// checkpoint is deleted the run warns and produces the window again.
func TestSeedLabWindowClosesOnlyAfterALaterEventAndSecondRunAddsNothing(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "checkpoint")
	writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
	writeLines(t, filepath.Join(in, "002.jsonl"), ev("e2", "c1", "2026-03-02T09:03:30Z"))
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 2

	progress := run(t, spec, microbatch.Options{})
	if got := sinkWindows(t, out, true); len(got) != 0 {
		t.Fatalf("window emitted before any later event moved the watermark: %v", got)
	}
	// Batch 0 raises the watermark to 09:03:30 - 10m; the no-data batch 1
	// that follows closes nothing.
	if len(progress) != 2 || !progress[1].NoData || progress[1].EventTime["watermark"] != "2026-03-02T08:53:30Z" || progress[1].Sink.NumOutputRows != 0 {
		t.Fatalf("want a data batch and a no-data batch at 08:53:30 emitting nothing, got %v", progressSummary(progress))
	}

	writeLines(t, filepath.Join(in, "003.jsonl"), ev("e3", "c1", "2026-03-02T09:31:00Z"))
	progress = run(t, spec, microbatch.Options{})
	// Batch 1 reads the late file and raises the watermark to 09:21; the
	// no-data batch 2 then closes [09:00, 09:05).
	if len(progress) != 2 || !progress[1].NoData || progress[1].Sink.NumOutputRows != 1 || progress[0].Sink.NumOutputRows != 0 {
		t.Fatalf("want a data batch with no output then a no-data batch emitting the window; got %+v", progressSummary(progress))
	}
	want := []tiletest.Window{{Start: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), Course: "c1", Count: 2}}
	if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
		t.Fatalf("sink log after first run:\n%s", d)
	}
	before := snapshotDir(t, out)

	if p := run(t, spec, microbatch.Options{}); len(p) != 0 {
		t.Fatalf("second availableNow on the same checkpoint ran %d batches", len(p))
	}
	if after := snapshotDir(t, out); !equalDirs(before, after) {
		t.Fatal("second availableNow changed the sink directory")
	}

	// Delete the checkpoint: a new query id replays the topic into the same
	// sink. In a lab that is warned about, and the window is written again.
	if err := os.RemoveAll(cp); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	run(t, spec, microbatch.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(strings.ToLower(logs.String()), "another query") && !strings.Contains(logs.String(), "holds output of query") {
		t.Fatalf("no loud warning about the sink holding another query's output; logs:\n%s", logs.String())
	}
	if got := sinkWindows(t, out, false); len(got) != 2 {
		t.Fatalf("after deleting the checkpoint the replay should write the window again (2 copies in the directory), got %v", got)
	}
}

func progressSummary(ps []*progress.Report) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Line())
	}
	return s
}

func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[strings.TrimPrefix(p, dir)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func equalDirs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// A larger input in many small batches: the Parquet output, read through
// the log and read by listing the directory, equals the oracle.
func TestTileOutputEqualsOracleOverManyBatches(t *testing.T) {
	for _, provider := range []string{"memory", "pebble"} {
		t.Run(provider, func(t *testing.T) { testTileOutputEqualsOracle(t, provider) })
	}
}

func testTileOutputEqualsOracle(t *testing.T, provider string) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(7, 20000, 150*time.Millisecond, 4*time.Minute, 13)
	if err := tiletest.WriteFiles(in, events, 500); err != nil {
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 7
	spec.StateStore = provider
	progress := run(t, spec, microbatch.Options{StateDir: filepath.Join(dir, "state")})
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	if len(want) < 50 {
		t.Fatalf("oracle too small to mean anything: %d windows", len(want))
	}
	if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
		t.Fatalf("output through the sink log differs from the oracle:\n%s", d)
	}
	if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
		t.Fatalf("output by directory listing differs from the oracle:\n%s", d)
	}
	var rows, dropped int64
	for _, p := range progress {
		rows += p.NumInputRows
		for _, s := range p.StateOperators {
			dropped += s.NumRowsDroppedByWatermark
		}
	}
	if rows != int64(len(events)) || dropped != 0 {
		t.Fatalf("progress counted %d input rows (want %d) and %d late (want 0)", rows, len(events), dropped)
	}
}

// A crash after the sink wrote batch N's files but before commits/N: the
// restart re-runs N from its logged offsets, rewrites the same files with
// the same bytes, and the directory holds each window once.
func TestRerunOfUncommittedBatchWritesSameFiles(t *testing.T) {
	for _, point := range []string{"after-offsets", "maps-done", "before-sink-commit", "after-sink-commit", "after-commit"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
			events := tiletest.Events(11, 6000, 200*time.Millisecond, 3*time.Minute, 5)
			if err := tiletest.WriteFiles(in, events, 500); err != nil {
				t.Fatal(err)
			}
			spec := tiletest.Spec(in, out, cp)
			spec.Source.File.MaxFilesPerTrigger = 3
			runUntilCrash(t, spec, point, 2)
			crashed := snapshotDir(t, out)

			progress := run(t, spec, microbatch.Options{})
			want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
			if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
				t.Fatalf("directory listing after restart differs from the oracle:\n%s", d)
			}
			if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
				t.Fatalf("sink log after restart differs from the oracle:\n%s", d)
			}
			after := snapshotDir(t, out)
			for name, b := range crashed {
				if !bytes.Equal(after[name], b) {
					t.Errorf("file %s written before the crash was changed by the re-run", name)
				}
			}
			rerun := point != "after-commit"
			if rerun != (len(progress) > 0 && progress[0].Rerun && progress[0].BatchID == 2) {
				t.Errorf("restart after %s: first batch %s, want re-run of batch 2: %v", point, progressSummary(progress)[0], rerun)
			}
			assertLogGapFree(t, cp)
		})
	}
}

// assertLogGapFree checks commits/ has no gaps and every batch's offsets
// start where the previous batch's ended.
func assertLogGapFree(t *testing.T, cp string) {
	t.Helper()
	store, _ := objstore.NewFS(cp)
	log := checkpoint.New(store)
	ctx := context.Background()
	cids, err := log.CommitIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range cids {
		if id != ids.BatchID(i) {
			t.Fatalf("commits are not gap-free: %v", cids)
		}
		if i == 0 {
			continue
		}
		prev, err := log.Offsets(ctx, id-1)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := log.Offsets(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(prev.Sources[0].End, cur.Sources[0].Start) {
			t.Fatalf("offsets/%d starts at %s, offsets/%d ended at %s", id, cur.Sources[0].Start, id-1, prev.Sources[0].End)
		}
	}
}

// foreachBatch: a naive appending writer called again for a re-run batch
// duplicates the output; the idempotent jsonBatches writer keeps one copy.
func TestNaiveBatchWriterDuplicatesOnRerunIdempotentWriterDoesNot(t *testing.T) {
	for _, naive := range []bool{true, false} {
		t.Run(fmt.Sprintf("naive=%v", naive), func(t *testing.T) {
			dir := t.TempDir()
			in, cp := filepath.Join(dir, "in"), filepath.Join(dir, "cp")
			events := tiletest.Events(3, 3000, 500*time.Millisecond, time.Minute, 4)
			if err := tiletest.WriteFiles(in, events, 3000); err != nil {
				t.Fatal(err)
			}
			spec := tiletest.Spec(in, "", cp)
			spec.Sink = query.Sink{JSONBatches: &query.JSONBatchesSink{Path: filepath.Join(dir, "out")}}
			spec.OutputMode = query.Update
			outStore, _ := objstore.NewFS(filepath.Join(dir, "out"))
			full := spec.WithDefaults()
			writer := func() microbatch.Options {
				if naive {
					return microbatch.Options{Writer: jsonbatches.NewAppending(outStore, full.OutputSchema())}
				}
				return microbatch.Options{Writer: jsonbatches.New(outStore, full.OutputSchema())}
			}
			// Crash after the writer ran for batch 0 but before commits/0.
			opts := writer()
			opts.Hook = func(p string, b ids.BatchID) {
				if p == "after-sink-commit" && b == 0 {
					panic(crash{p})
				}
			}
			func() {
				job, err := microbatch.Build(context.Background(), spec, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer job.Close()
				defer func() { _ = recover() }()
				_ = job.Run(context.Background(), nil)
			}()
			run(t, spec, writer())
			all, err := jsonbatches.ReadAll(context.Background(), outStore)
			if err != nil {
				t.Fatal(err)
			}
			perWindow := map[string]int{}
			for _, r := range all[0] {
				perWindow[fmt.Sprint(r["window_start"], r["course_id"])]++
			}
			dups := 0
			for _, n := range perWindow {
				if n > 1 {
					dups++
				}
			}
			if naive && dups == 0 {
				t.Fatal("the naive appending writer should have duplicated batch 0's rows after the re-run")
			}
			if !naive && dups != 0 {
				t.Fatalf("the idempotent writer left %d duplicated windows in batch_id=0", dups)
			}
		})
	}
}

// Malformed records are counted and set aside once per batch, even when
// the batch re-runs.
func TestMalformedRecordsAreCountedAndSetAsideOnce(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	writeLines(t, filepath.Join(in, "001.jsonl"),
		ev("e1", "c1", "2026-03-02T09:01:00Z"),
		`{"event_id":"e2","course_id":"c1","event_time":1772442060.5}`,
		`not json`,
		`{"event_id":"e4","course_id":"c1","event_time":"yesterday"}`,
		`{"event_id":"e5","event_time":"2026-03-02T09:01:00Z"}`,
		ev("e6", "c1", "2026-03-02T09:40:00Z"))
	spec := tiletest.Spec(in, out, cp)
	runUntilCrash(t, spec, "after-sink-commit", 0)
	progress := run(t, spec, microbatch.Options{})
	if progress[0].NumRowsMalformed != 4 || progress[0].NumInputRows != 6 {
		t.Fatalf("batch 0 counted %d malformed of %d rows, want 4 of 6", progress[0].NumRowsMalformed, progress[0].NumInputRows)
	}
	line := progress[0].Line()
	if want := "6 rows read (2 good, 4 malformed)"; !strings.Contains(line, want) || !strings.Contains(line, "set aside in "+cp+"/bad_records/batch_id=0/") {
		t.Fatalf("batch line %q should say %q and where the malformed records went", line, want)
	}
	bad, err := filepath.Glob(filepath.Join(cp, "bad_records", "batch_id=0", "*"))
	if err != nil || len(bad) != 1 {
		t.Fatalf("want one bad-records file for batch 0, got %v (%v)", bad, err)
	}
	data, _ := os.ReadFile(bad[0])
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("bad-records file holds %d records, want 4:\n%s", len(lines), data)
	}
	for _, want := range []string{`"field":"course_id"`, `"offset":3`, `"field":"event_time"`, `missing non-nullable`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("bad records lack %s:\n%s", want, data)
		}
	}
	if got := sinkWindows(t, out, true); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("good rows should still be counted: %v", got)
	}
}

func TestChangedAggregationIsRefusedWithNewCheckpointRequired(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
	spec := tiletest.Spec(in, out, cp)
	run(t, spec, microbatch.Options{})
	spec.Aggregate.GroupBy = []string{"course_id", "lesson_id"}
	_, err := microbatch.Build(context.Background(), spec, microbatch.Options{})
	if !errors.Is(err, checkpoint.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "new checkpoint required") || !strings.Contains(err.Error(), "lesson_id") {
		t.Fatalf("want a 'new checkpoint required' error naming both state schemas, got %v", err)
	}
	spec = tiletest.Spec(in, out, cp)
	spec.ShufflePartitions = 16
	_, err = microbatch.Build(context.Background(), spec, microbatch.Options{})
	if !errors.Is(err, checkpoint.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "checkpoint has 4, query has 16") {
		t.Fatalf("want shufflePartitions refused side by side, got %v", err)
	}
}

func TestProductionRefusesLocalCheckpointAndEmptyCheckpointWithoutFlag(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "001.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	spec.Environment = query.Production
	_, err := microbatch.Build(context.Background(), spec, microbatch.Options{AllowFirstStart: true})
	if !errors.Is(err, microbatch.ErrProductionGuard) || !strings.Contains(err.Error(), "object store") {
		t.Fatalf("want production guard on a local checkpoint, got %v", err)
	}
}
