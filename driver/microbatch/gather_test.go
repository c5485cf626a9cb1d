package microbatch_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/task"
)

// A batch whose reduce tasks emit a few rows each stages one file per
// date, gathered by the driver; a batch whose partitions emit more than
// the bound (64 KiB of rows each) has each task stage its own file. Both
// give the oracle's windows, by the log and by listing.
func TestSmallOutputsAreGatheredAndLargeOnesWrittenByTheirTasks(t *testing.T) {
	for _, c := range []struct {
		name    string
		courses int
		want    func(files []string) bool
		says    string
	}{
		{"small", 20, func(f []string) bool { return len(f) == 1 }, "one gathered file"},
		{"large", 12000, func(f []string) bool { return len(f) == 4 }, "one file per state partition (4)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
			var events []tiletest.Event
			var lines []string
			start := time.Date(2026, 3, 2, 9, 1, 0, 0, time.UTC)
			for i := range c.courses {
				id, course := fmt.Sprint(i), fmt.Sprintf("course-%05d", i)
				lines = append(lines, ev(id, course, start.Format(time.RFC3339)))
				events = append(events, tiletest.Event{ID: id, Course: course, Time: start})
			}
			writeLines(t, filepath.Join(in, "001.jsonl"), lines...)
			late := start.Add(30 * time.Minute)
			writeLines(t, filepath.Join(in, "002.jsonl"), ev("last", "course-x", late.Format(time.RFC3339)))
			events = append(events, tiletest.Event{ID: "last", Course: "course-x", Time: late})
			spec := tiletest.Spec(in, out, filepath.Join(dir, "cp"))
			spec.Source.File.MaxFilesPerTrigger = 1
			var mu sync.Mutex
			var staged []string // the files staged: the one batch that closes 09:00 (09:31 stays open)
			opts := microbatch.Options{WrapStore: func(role string, s objstore.Store) objstore.Store {
				if role != task.RoleSink {
					return s
				}
				return &tracing{Store: s, role: role, emit: func(l string) {
					if f := strings.Fields(l); f[1] == "create-multipart" {
						mu.Lock()
						staged = append(staged, f[2])
						mu.Unlock()
					}
				}}
			}}
			run(t, spec, opts)
			slices.Sort(staged)
			if !c.want(staged) {
				t.Fatalf("the run staged %v, want %s", staged, c.says)
			}
			want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
			for _, follow := range []bool{false, true} {
				if d := tiletest.Diff(want, sinkWindows(t, out, follow)); d != "" {
					t.Fatalf("sink (follow log=%v) differs from the oracle:\n%s", follow, d)
				}
			}
		})
	}
}
