package microbatch_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/task"
)

// readTracing records the source files opened, with the writes.
type readTracing struct {
	tracing
	opened func(key string)
}

func (s *readTracing) Get(ctx context.Context, key string) ([]byte, error) {
	s.opened(key)
	return s.Store.Get(ctx, key)
}

func (s *readTracing) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	s.opened(key)
	return objstore.GetReader(ctx, s.Store, key)
}

func (s *readTracing) PutStream(ctx context.Context, key string, r io.Reader) error {
	return objstore.PutReader(ctx, s.Store, key, r)
}

// While a batch reduces and commits, the next batch's map tasks read its
// files; its offsets are still written only after the commit before it,
// and its malformed records only after its offsets. The output equals the
// oracle.
func TestNextBatchReadsWhileTheBatchBeforeCommits(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(33, 3000, 400*time.Millisecond, 2*time.Minute, 5)
	files := writeEventFiles(t, in, events, 1000, "part-00001.jsonl")
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 1

	var mu sync.Mutex
	var trace []string
	point := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	secondRead := make(chan struct{})
	var once sync.Once
	opts := microbatch.Options{
		WrapStore: func(role string, s objstore.Store) objstore.Store {
			if role == task.RoleSource {
				return &readTracing{tracing: tracing{Store: s, role: role, emit: point}, opened: func(key string) {
					point("source open " + key)
					if key == files[1] {
						once.Do(func() { close(secondRead) })
					}
				}}
			}
			return &tracing{Store: s, role: role, emit: point}
		},
		Hook: func(p string, b ids.BatchID) {
			point(fmt.Sprintf("-- %s %d", p, b))
			if p == "before-sink-commit" && b == 0 {
				// Batch 0 commits only once batch 1 has started reading.
				select {
				case <-secondRead:
				case <-time.After(20 * time.Second):
					t.Error("batch 1 did not start reading while batch 0 committed")
				}
			}
		},
	}
	progress := run(t, spec, opts)
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), sinkWindows(t, out, true)); d != "" {
		t.Fatalf("output differs from the oracle:\n%s", d)
	}
	if n := progress[1].NumRowsMalformed; n != 1 {
		t.Fatalf("batch 1 set %d records aside, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	at := func(s string) int {
		i := slices.Index(trace, s)
		if i < 0 {
			t.Fatalf("%q is not in the trace:\n%s", s, strings.Join(trace, "\n"))
		}
		return i
	}
	badRecords := -1
	for i, l := range trace {
		if strings.HasPrefix(l, "badRecords put batch_id=1/") || strings.HasPrefix(l, "checkpoint put bad_records/batch_id=1/") {
			badRecords = i
		}
	}
	switch {
	case at("source open "+files[1]) > at("checkpoint put-if-absent commits/0"):
		t.Errorf("batch 1 read its file only after commits/0:\n%s", strings.Join(trace, "\n"))
	case at("checkpoint put-if-absent offsets/1") < at("checkpoint put-if-absent commits/0"):
		t.Errorf("offsets/1 was written before commits/0:\n%s", strings.Join(trace, "\n"))
	case badRecords < at("checkpoint put-if-absent offsets/1"):
		t.Errorf("batch 1's malformed records were written (at %d) before offsets/1:\n%s", badRecords, strings.Join(trace, "\n"))
	case at("-- map-done 1") < at("checkpoint put-if-absent offsets/1"):
		t.Errorf("batch 1's map-done point came before offsets/1:\n%s", strings.Join(trace, "\n"))
	}
}

// A crash while a batch commits with the next one's map tasks running
// ahead leaves nothing of the next batch: no offsets, no bad records. The
// restart re-runs the logged batch, then plans the next one, and the
// output is the oracle's, exactly once.
func TestCrashWithTheNextBatchAheadLeavesNothingOfIt(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(34, 3000, 400*time.Millisecond, 2*time.Minute, 5)
	writeEventFiles(t, in, events, 1000, "part-00001.jsonl")
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 1
	// after-sink-commit of batch 0 comes after batch 1's map tasks were
	// started ahead (they started when batch 0's ended).
	runUntilCrash(t, spec, "after-sink-commit", 0)
	for _, p := range []string{"offsets/1", "bad_records/batch_id=1"} {
		if _, err := os.Stat(filepath.Join(cp, p)); err == nil {
			t.Fatalf("%s exists after a crash in batch 0", p)
		}
	}
	progress := run(t, spec, microbatch.Options{})
	if !progress[0].Rerun || progress[0].BatchID != 0 || progress[1].BatchID != 1 || progress[1].Rerun {
		t.Fatalf("restart ran %s then %s; want batch 0 re-run, then batch 1", progress[0].Line(), progress[1].Line())
	}
	if d := tiletest.Diff(tiletest.Oracle(events, 5*time.Minute, 10*time.Minute), sinkWindows(t, out, false)); d != "" {
		t.Fatalf("output (every file in the sink directory) differs from the oracle:\n%s", d)
	}
	bad, _ := filepath.Glob(filepath.Join(cp, "bad_records", "batch_id=*", "*"))
	if len(bad) != 1 {
		t.Fatalf("bad-record files %v, want the one of batch 1", bad)
	}
}

// writeEventFiles writes events as files of perFile lines and appends a
// malformed line to the file named bad; it returns the files' names in
// order.
func writeEventFiles(t *testing.T, in string, events []tiletest.Event, perFile int, bad string) []string {
	t.Helper()
	if err := tiletest.WriteFiles(in, events, perFile); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(in, bad), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not json\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
