package microbatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// A batch that evicts closed windows records them in its state delta as
// one range deletion (state file format 2). A driver that dies at any
// point the driver's goroutine reaches, after several such deltas, is
// replaced by one whose state store (a fresh one: nothing cached, no
// snapshot to start from) loads the state through them: the output is
// the oracle's, every window once, for both providers.
func TestRestartLoadsStateThroughRangeDeletionDeltas(t *testing.T) {
	for _, provider := range []string{"memory", "pebble"} {
		for i, point := range []string{"after-offsets", "maps-done", "before-sink-commit", "after-sink-commit", "after-commit"} {
			if testing.Short() && (i%2 == 0) != (provider == "memory") {
				continue // -short (the fast loop): each point with one provider, alternating
			}
			t.Run(provider+"/"+point, func(t *testing.T) {
				dir := t.TempDir()
				in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
				// 200 ms per event, 1 500 per batch: five minutes of
				// event time a batch, so from the third batch on each
				// closes a window the versions before hold.
				events := tiletest.Events(17, 12000, 200*time.Millisecond, 3*time.Minute, 40)
				if err := tiletest.WriteFiles(in, events, 500); err != nil {
					t.Fatal(err)
				}
				spec := tiletest.Spec(in, out, cp)
				spec.Source.File.MaxFilesPerTrigger = 3
				spec.StateStore = provider
				spec.SnapshotInterval = 1000
				const crashBatch = 6
				crashAt(t, spec, microbatch.Options{StateDir: filepath.Join(dir, "state-1")}, point, crashBatch)

				ranged := rangeDeltas(t, cp)
				if len(ranged) < 2 {
					t.Fatalf("%d deltas with a range deletion before the crash (%v), want several", len(ranged), ranged)
				}
				progress := run(t, spec, microbatch.Options{StateDir: filepath.Join(dir, "state-2")})
				want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
				if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
					t.Fatalf("output through the sink log after the restart differs from the oracle:\n%s", d)
				}
				if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
					t.Fatalf("output by directory listing after the restart differs from the oracle:\n%s", d)
				}
				if len(progress) == 0 || progress[0].BatchID > crashBatch+1 {
					t.Fatalf("the restart began at %v, want batch %d or %d", progressSummary(progress), crashBatch, crashBatch+1)
				}
			})
		}
	}
}

// crashAt is runUntilCrash with options (the pebble provider's data
// directory): the run aborts (a panic, as a process death would) at point
// of batch.
func crashAt(t *testing.T, spec query.Spec, opts microbatch.Options, point string, batch ids.BatchID) {
	t.Helper()
	opts.Hook = func(p string, b ids.BatchID) {
		if p == point && b == batch {
			panic(crash{p})
		}
	}
	job, err := microbatch.Build(context.Background(), spec, opts)
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

// rangeDeltas returns the state deltas in the checkpoint whose format is 2
// (a range deletion first).
func rangeDeltas(t *testing.T, cp string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(filepath.Join(cp, "state"), func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(path, ".delta") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(b) > 6 && string(b[:4]) == "SLST" && b[4] == 2 {
			out = append(out, strings.TrimPrefix(path, cp+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
