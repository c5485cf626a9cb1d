package microbatch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/statestore"
)

// One record stamped in 2099 among the tile's events. With
// watermark.maxEventTimeAhead it is set aside as malformed with its reason
// and the tile keeps closing windows; without it the watermark jumps to
// 2099, the jump is logged and counted, and every later row is dropped as
// late (which is why the guard exists).
func TestFarFutureRowIsSetAsideAndTheTileKeepsClosingWindows(t *testing.T) {
	files := [][]string{
		{ev("e1", "c1", "2026-03-02T09:01:00Z"), ev("e2", "c1", "2026-03-02T09:03:00Z")},
		{ev("bad-clock", "c1", "2099-01-01T00:00:00Z"), ev("e3", "c1", "2026-03-02T09:20:00Z")},
		{ev("e4", "c1", "2026-03-02T09:31:00Z")},
		{ev("e5", "c1", "2026-03-02T09:45:00Z")},
	}
	setup := func(t *testing.T, guard bool) (query.Spec, string, string) {
		dir := t.TempDir()
		in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
		for i, lines := range files {
			writeLines(t, filepath.Join(in, []string{"001", "002", "003", "004"}[i]+".jsonl"), lines...)
		}
		spec := tiletest.Spec(in, out, cp)
		spec.Source.File.MaxFilesPerTrigger = 1
		if guard {
			spec.Watermark.MaxEventTimeAhead = query.Duration(time.Hour)
		}
		return spec, out, cp
	}
	at := func(hh, mm int) time.Time { return time.Date(2026, 3, 2, hh, mm, 0, 0, time.UTC) }

	t.Run("guarded", func(t *testing.T) {
		spec, out, cp := setup(t, true)
		progress := run(t, spec, microbatch.Options{})
		var malformed, ahead, jumps int64
		for _, p := range progress {
			malformed += p.NumRowsMalformed
			ahead += p.NumRowsTooFarAhead
			jumps = max(jumps, p.NumWatermarkJumps)
		}
		if malformed != 1 || ahead != 1 || jumps != 0 {
			t.Fatalf("want the 2099 row set aside (1 malformed, 1 too far ahead) and no watermark jump; got %d, %d, %d: %v", malformed, ahead, jumps, progressSummary(progress))
		}
		// The oracle: the tile over the good rows, windows closed by
		// the 09:45 event's watermark (09:35); 09:45 stays open.
		want := []tiletest.Window{{Start: at(9, 0), Course: "c1", Count: 2}, {Start: at(9, 20), Course: "c1", Count: 1}, {Start: at(9, 30), Course: "c1", Count: 1}}
		if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
			t.Fatalf("windows:\n%s", d)
		}
		bad, _ := filepath.Glob(filepath.Join(cp, "bad_records", "batch_id=*", "*"))
		if len(bad) != 1 {
			t.Fatalf("want one bad-records file, got %v", bad)
		}
		data, _ := os.ReadFile(bad[0])
		for _, w := range []string{`"field":"event_time"`, "2099-01-01T00:00:00Z", "more than watermark.maxEventTimeAhead 1h0m0s ahead", "bad-clock"} {
			if !strings.Contains(string(data), w) {
				t.Errorf("bad record lacks %q:\n%s", w, data)
			}
		}
	})

	t.Run("unguarded", func(t *testing.T) {
		spec, out, _ := setup(t, false)
		var logs bytes.Buffer
		progress := run(t, spec, microbatch.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		var jumps, dropped int64
		for _, p := range progress {
			jumps = max(jumps, p.NumWatermarkJumps)
			for _, op := range p.StateOperators {
				dropped += op.NumRowsDroppedByWatermark
			}
		}
		if jumps != 1 || !strings.Contains(logs.String(), "watermark jumped") {
			t.Fatalf("want one watermark jump counted and logged, got %d: %v\nlogs:\n%s", jumps, progressSummary(progress), logs.String())
		}
		// e4 runs in the batch right after the jump (still judged against
		// the previous watermark); e5, a batch later, is dropped as late,
		// and its window is lost.
		if dropped != 1 {
			t.Fatalf("want the row after the jump dropped as late, got %d: %v", dropped, progressSummary(progress))
		}
		got := sinkWindows(t, out, true)
		for _, w := range got {
			if w.Start.Equal(at(9, 45)) {
				t.Fatalf("unguarded run should have lost the 09:45 window to the jump: %v", got)
			}
		}
	})
}

// The in-memory state store past its per-process limit fails the query
// with a message that says to switch to pebble, without retrying.
func TestStateMemoryLimitFailsTheQueryWithAdviceToUsePebble(t *testing.T) {
	in, _ := tileEvents(t, 2000)
	dir := t.TempDir()
	spec := tiletest.Spec(in, filepath.Join(dir, "out"), filepath.Join(dir, "cp"))
	limit := statestore.NewMemoryLimit(8 << 10)
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{StateMemoryLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	err = job.Run(context.Background(), nil)
	if !errors.Is(err, statestore.ErrMemoryLimit) || !strings.Contains(err.Error(), "stateStore: pebble") || !strings.Contains(err.Error(), "after 1 attempts") {
		t.Fatalf("run past the state memory limit: %v; want ErrMemoryLimit, advice to use pebble, no retries", err)
	}
	t.Logf("the error: %v", err)
	// The same query with room runs to the end.
	spec.CheckpointLocation = filepath.Join(dir, "cp2")
	spec.Sink.Parquet.Path = filepath.Join(dir, "out2")
	run(t, spec, microbatch.Options{StateMemoryLimit: statestore.NewMemoryLimit(64 << 20)})
}

func tileEvents(t *testing.T, n int) (string, []tiletest.Window) {
	events := tiletest.Events(20, n, 150*time.Millisecond, 4*time.Minute, 400)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 250); err != nil {
		t.Fatal(err)
	}
	return in, tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
}
