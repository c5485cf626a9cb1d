package engine_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/tiletest"
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
	total := func(opts engine.Options) int64 {
		var n int64
		for _, p := range run(t, spec, opts) {
			n += p.NumInputRows
		}
		return n
	}
	if n := total(engine.Options{}); n != 2 {
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
	if n := total(engine.Options{}); n != 2 {
		t.Fatalf("the restarted run read %d rows, want the 2 of a.jsonl and c.jsonl", n)
	}
	if n := total(engine.Options{}); n != 0 {
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
	run(t, spec, engine.Options{})
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
