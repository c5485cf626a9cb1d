package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parquetFiles counts the .parquet files under each window_date= directory.
func parquetFiles(t *testing.T, sink string) map[string]int {
	t.Helper()
	n := map[string]int{}
	dirs, _ := filepath.Glob(filepath.Join(sink, "window_date=*"))
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.parquet"))
		n[filepath.Base(d)] = len(files)
	}
	return n
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}

// driver compact on the lab: three dates of many one-batch files; after a
// later event closes them, compact rewrites each into one file, sink cat
// prints the same rows, and the query goes on.
func TestCLICompactClosedDates(t *testing.T) {
	dir := t.TempDir()
	labSpec(t, dir)
	n := 0
	for _, day := range []string{"2026-03-01", "2026-03-02", "2026-03-03"} {
		for k := 0; k < 3; k++ {
			n++
			write(t, filepath.Join(dir, fmt.Sprintf("lab/in/%03d.jsonl", n)),
				fmt.Sprintf(`{"event_id":"e%d","course_id":"c%d","lesson_id":"l1","event_time":"%sT%02d:01:00Z"}`, n, k, day, 6*k+1),
				fmt.Sprintf(`{"event_id":"f%d","course_id":"d%d","lesson_id":"l1","event_time":"%sT%02d:01:00Z"}`, n, k, day, 6*k+3))
			runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0)
		}
	}
	// Close 03-01..03-03: the watermark moves to 03-04T09:50.
	write(t, filepath.Join(dir, "lab/in/100.jsonl"), `{"event_id":"z","course_id":"z","lesson_id":"l1","event_time":"2026-03-04T10:00:00Z"}`)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0) // a no-data batch commits the watermark's windows

	sink := filepath.Join(dir, "lab/course_activity_tile")
	before := runDriver(t, dir, "sink", "cat", "lab/course_activity_tile")
	before.expect(t, 0)
	filesBefore := parquetFiles(t, sink)

	runDriver(t, dir, "compact", "--sink", "lab/course_activity_tile").expect(t, 1, "--checkpoint is required")
	r := runDriver(t, dir, "compact", "--sink", "lab/course_activity_tile", "--checkpoint", "lab/checkpoint", "--dry-run")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "3 dates would compact") || !maps(parquetFiles(t, sink), filesBefore) {
		t.Fatalf("dry run:\n%s", r.stdout)
	}
	r = runDriver(t, dir, "compact", "--sink", "lab/course_activity_tile", "--checkpoint", "lab/checkpoint")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "3 dates compacted") {
		t.Fatalf("compact printed:\n%s", r.stdout)
	}
	filesAfter := parquetFiles(t, sink)
	for _, d := range []string{"window_date=2026-03-01", "window_date=2026-03-02", "window_date=2026-03-03"} {
		if filesBefore[d] < 3 || filesAfter[d] != 1 {
			t.Fatalf("%s: %d files before, %d after; want several, then 1", d, filesBefore[d], filesAfter[d])
		}
	}
	after := runDriver(t, dir, "sink", "cat", "lab/course_activity_tile")
	after.expect(t, 0)
	if !slices.Equal(sortedLines(before.stdout), sortedLines(after.stdout)) {
		t.Fatalf("sink cat before:\n%s\nafter:\n%s", before.stdout, after.stdout)
	}
	if len(sortedLines(after.stdout)) != 18 {
		t.Fatalf("sink cat printed %d windows, want 18:\n%s", len(sortedLines(after.stdout)), after.stdout)
	}

	// The query goes on after the compaction.
	write(t, filepath.Join(dir, "lab/in/101.jsonl"), `{"event_id":"y","course_id":"y","lesson_id":"l1","event_time":"2026-03-05T10:00:00Z"}`)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0)
	runDriver(t, dir, "run", "-f", "q.yaml").expect(t, 0)
	again := runDriver(t, dir, "sink", "cat", "lab/course_activity_tile")
	again.expect(t, 0)
	if !strings.Contains(again.stdout, `"course_id":"z"`) || len(sortedLines(again.stdout)) != 19 {
		t.Fatalf("after the query went on, sink cat printed:\n%s", again.stdout)
	}
	if _, err := os.Stat(filepath.Join(sink, "_sink_compact")); err == nil {
		t.Fatal("the staging directory is left behind")
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
