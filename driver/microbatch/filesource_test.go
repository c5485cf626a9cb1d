package microbatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// A file whose name sorts before every file already taken, added while the
// driver is down, is read exactly once by the restarted query: Spark's file
// source reads every file it has not seen, whatever its name. Then a run
// with nothing new reads nothing.
func TestFileSourceReadsAFileThatSortsFirstAddedWhileTheDriverWasDown(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	writeLines(t, filepath.Join(in, "b.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"), ev("e2", "c2", "2026-03-02T09:02:00Z"))
	spec := tiletest.Spec(in, out, cp)
	spec.Trigger = query.Trigger{AvailableNow: true}
	total := func(opts microbatch.Options) int64 {
		var n int64
		for _, p := range run(t, spec, opts) {
			n += p.NumInputRows
		}
		return n
	}
	if n := total(microbatch.Options{}); n != 2 {
		t.Fatalf("first run read %d rows, want 2", n)
	}
	// The driver is down: a.jsonl (sorting first) and c.jsonl arrive.
	writeLines(t, filepath.Join(in, "a.jsonl"), ev("e3", "c1", "2026-03-02T09:03:00Z"))
	writeLines(t, filepath.Join(in, "c.jsonl"), ev("e4", "c1", "2026-03-02T09:31:00Z"))
	// a.jsonl even looks older than everything taken (copied with its
	// times kept): still within maxFileAge, so still read.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(in, "a.jsonl"), old, old); err != nil {
		t.Fatal(err)
	}
	if n := total(microbatch.Options{}); n != 2 {
		t.Fatalf("the restarted run read %d rows, want the 2 of a.jsonl and c.jsonl", n)
	}
	if n := total(microbatch.Options{}); n != 0 {
		t.Fatalf("a run with nothing new read %d rows", n)
	}
	want := []tiletest.Window{
		{Start: at("2026-03-02T09:00:00Z"), Course: "c1", Count: 2},
		{Start: at("2026-03-02T09:00:00Z"), Course: "c2", Count: 1},
	}
	if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
		t.Fatalf("output differs (a.jsonl must count once in c1's window):\n%s", d)
	}
}

// cleanSource: archive moves each committed batch's files out of the
// source directory into sourceArchiveDir; a restart reads nothing again.
func TestFileSourceCleanSourceArchivesCommittedFiles(t *testing.T) {
	dir := t.TempDir()
	in, out, cp, arch := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp"), filepath.Join(dir, "archive")
	writeLines(t, filepath.Join(in, "1.jsonl"), ev("e1", "c1", "2026-03-02T09:01:00Z"))
	writeLines(t, filepath.Join(in, "2.jsonl"), ev("e2", "c1", "2026-03-02T09:31:00Z"))
	spec := tiletest.Spec(in, out, cp)
	spec.Trigger = query.Trigger{AvailableNow: true}
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Source.File.CleanSource = query.CleanSourceArchive
	spec.Source.File.SourceArchiveDir = arch
	run(t, spec, microbatch.Options{})
	for _, name := range []string{"1.jsonl", "2.jsonl"} {
		if _, err := os.Stat(filepath.Join(in, name)); !os.IsNotExist(err) {
			t.Errorf("%s still in the source directory: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(arch, name)); err != nil {
			t.Errorf("%s not archived: %v", name, err)
		}
	}
	want := []tiletest.Window{{Start: at("2026-03-02T09:00:00Z"), Course: "c1", Count: 1}}
	if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
		t.Fatalf("output differs:\n%s", d)
	}
}

// A file larger than a split is read in byte ranges, one map task each:
// every row counts once (the windows equal an oracle counted from the
// lines), and a malformed record in any range is set aside with its
// file and line number, once, also when the batch is re-run after a crash
// (the re-run has the same tasks, so it replaces their bad-record files).
func TestLargeFileIsReadInRangesWithLineNumbersForBadRecords(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	base := at("2026-03-02T09:00:00Z")
	var lines []string
	counts := map[tiletest.Window]int64{}
	badAt := map[int]bool{1: true, 40_000: true, 70_001: true, 120_000: true}
	var maxTs time.Time
	for i := 1; i <= 120_000; i++ { // about 10 MB: three ranges of one file
		if badAt[i] {
			lines = append(lines, fmt.Sprintf(`{"event_id":"bad-%d","course_id":"c1","event_time":"never"}`, i))
			continue
		}
		ts := base.Add(time.Duration(i) * 10 * time.Millisecond)
		course := fmt.Sprintf("c%d", i%7)
		lines = append(lines, ev(fmt.Sprintf("e%d", i), course, ts.Format(time.RFC3339Nano)))
		counts[tiletest.Window{Start: ts.Truncate(5 * time.Minute), Course: course}]++
		maxTs = ts
	}
	writeLines(t, filepath.Join(in, "big.jsonl"), lines...)
	spec := tiletest.Spec(in, out, cp)
	runUntilCrash(t, spec, "after-sink-commit", 0)
	progress := run(t, spec, microbatch.Options{})
	if progress[0].NumInputRows != 120_000 || progress[0].NumRowsMalformed != 4 {
		t.Fatalf("batch 0 read %d rows, %d malformed; want 120000, 4", progress[0].NumInputRows, progress[0].NumRowsMalformed)
	}
	files, err := filepath.Glob(filepath.Join(cp, "bad_records", "batch_id=0", "*"))
	if err != nil || len(files) != 3 {
		t.Fatalf("bad-record files %v (%v): want one per range with bad records, 3", files, err)
	}
	got := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(data)) {
			var br struct {
				Source string `json:"source"`
				Offset int64  `json:"offset"`
				Record string `json:"record"`
			}
			if err := json.Unmarshal([]byte(l), &br); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("%s:%d", br.Source, br.Offset)
			if got[key] || !strings.Contains(br.Record, fmt.Sprintf(`"bad-%d"`, br.Offset)) {
				t.Errorf("bad record %s (twice, or not the line it names): %s", key, l)
			}
			got[key] = true
		}
	}
	for i := range badAt {
		if !got[fmt.Sprintf("big.jsonl:%d", i)] {
			t.Errorf("line %d was not set aside with its line number; set aside: %v", i, got)
		}
	}
	emitted := sinkWindows(t, out, true)
	state := progress[len(progress)-1].StateOperators[0].NumRowsTotal
	if int64(len(emitted))+state != int64(len(counts)) {
		t.Fatalf("%d windows emitted + %d open, the oracle has %d", len(emitted), state, len(counts))
	}
	// The watermark ends 10 minutes before the latest event: the windows
	// that end by then are in the sink, each with the oracle's count.
	watermark := maxTs.Add(-10 * time.Minute)
	closed := 0
	for w := range counts {
		if !w.Start.Add(5 * time.Minute).After(watermark) {
			closed++
		}
	}
	for _, w := range emitted {
		c := w.Count
		w.Count = 0
		if counts[w] != c {
			t.Errorf("window %v %s counted %d, the oracle %d", w.Start, w.Course, c, counts[w])
		}
	}
	if len(emitted) != closed || closed == 0 {
		t.Fatalf("%d windows emitted, %d closed by the watermark", len(emitted), closed)
	}
}
