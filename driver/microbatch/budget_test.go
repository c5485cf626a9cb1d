package microbatch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// A state budget flags the batches whose state passes it (they still
// commit, the output equals the oracle) and, with onExceed: stop, stops the
// query after the first such batch commits, naming the operator, its rows
// and the budget. The budget is set from a run without one, so the test
// knows which batch passes it.
func TestStateBudgetFlagsAndStops(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	events := tiletest.Events(11, 6000, 150*time.Millisecond, 4*time.Minute, 13)
	if err := tiletest.WriteFiles(in, events, 500); err != nil {
		t.Fatal(err)
	}
	spec := func(name string, b *query.StateBudget) query.Spec {
		s := tiletest.Spec(in, filepath.Join(dir, name, "out"), filepath.Join(dir, name, "cp"))
		s.Source.File.MaxFilesPerTrigger = 2
		s.StateBudget = b
		return s
	}
	base := run(t, spec("base", nil), microbatch.Options{})
	if len(base) < 4 {
		t.Fatalf("only %d batches: too few to place a budget between them", len(base))
	}
	rows := func(p *progress.Report) int64 { return p.StateOperators[0].NumRowsTotal }
	bytes := func(p *progress.Report) int64 { return p.StateOperators[0].MemoryUsedBytes }
	// The budget: below the largest state, above the first batch's.
	var maxRows, maxBytes int64
	for _, p := range base {
		maxRows, maxBytes = max(maxRows, rows(p)), max(maxBytes, bytes(p))
	}
	maxRows, maxBytes = (rows(base[0])+maxRows)/2, (bytes(base[0])+maxBytes)/2
	if rows(base[0]) >= maxRows || bytes(base[0]) >= maxBytes {
		t.Fatalf("state does not grow past the first batch (rows %d of max %d): no budget can be placed", rows(base[0]), maxRows)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)

	for _, c := range []struct {
		name   string
		budget query.StateBudget
		over   func(p *progress.Report) bool
	}{
		{"rows", query.StateBudget{MaxRows: maxRows}, func(p *progress.Report) bool { return rows(p) > maxRows }},
		{"bytes", query.StateBudget{MaxBytes: maxBytes, OnExceed: query.OnExceedFlag}, func(p *progress.Report) bool { return bytes(p) > maxBytes }},
	} {
		t.Run("flag-"+c.name, func(t *testing.T) {
			b := c.budget
			got := run(t, spec("flag-"+c.name, &b), microbatch.Options{})
			if len(got) != len(base) {
				t.Fatalf("%d batches with a flag budget, %d without", len(got), len(base))
			}
			flagged := 0
			for i, p := range got {
				sb := p.StateBudget
				if sb == nil || sb.OnExceed != query.OnExceedFlag {
					t.Fatalf("batch %d: stateBudget %+v", p.BatchID, sb)
				}
				if sb.Exceeded != c.over(base[i]) {
					t.Errorf("batch %d: exceeded %v, but the run without a budget had %d rows, %d bytes against %s", p.BatchID, sb.Exceeded, rows(base[i]), bytes(base[i]), &b)
				}
				if sb.Exceeded {
					flagged++
					if !strings.Contains(sb.Message, "operator stateStoreSave") || !strings.Contains(sb.Message, b.String()) {
						t.Errorf("batch %d: message %q", p.BatchID, sb.Message)
					}
				}
			}
			if flagged == 0 || flagged == len(got) {
				t.Fatalf("%d of %d batches flagged: the budget separates nothing", flagged, len(got))
			}
			if d := tiletest.Diff(want, sinkWindows(t, filepath.Join(dir, "flag-"+c.name, "out"), true)); d != "" {
				t.Fatalf("a flagged query's output differs from the oracle:\n%s", d)
			}
		})
	}

	t.Run("stop", func(t *testing.T) {
		first := -1
		for i, p := range base {
			if rows(p) > maxRows {
				first = i
				break
			}
		}
		s := spec("stop", &query.StateBudget{MaxRows: maxRows, OnExceed: query.OnExceedStop})
		var got []*progress.Report
		job, err := microbatch.Build(context.Background(), s, microbatch.Options{Observer: progress.Committed(func(p *progress.Report) { got = append(got, p) })})
		if err != nil {
			t.Fatal(err)
		}
		defer job.Close()
		err = job.Run(context.Background(), nil)
		if !errors.Is(err, microbatch.ErrStateBudgetExceeded) {
			t.Fatalf("run: %v, want the state budget error", err)
		}
		wantMsg := fmt.Sprintf("operator stateStoreSave (%s) holds %d rows", s.StateSchemaDescription(), rows(base[first]))
		for _, w := range []string{wantMsg, fmt.Sprintf("budget maxRows %d, onExceed stop", maxRows), fmt.Sprintf("stopped after batch %d committed", base[first].BatchID)} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error %q does not say %q", err, w)
			}
		}
		if len(got) != first+1 {
			t.Fatalf("%d batches ran, want %d (up to the first past the budget)", len(got), first+1)
		}
		st, err := objstore.NewFS(filepath.Join(dir, "stop", "cp"))
		if err != nil {
			t.Fatal(err)
		}
		_, commit, err := checkpoint.New(st).Latest(context.Background())
		if err != nil || commit == nil || commit.BatchID != base[first].BatchID {
			t.Fatalf("last commit %+v, %v: want batch %d committed", commit, err, base[first].BatchID)
		}
	})
}

// approx_count_distinct's state cost is reported: one sketch per state row
// and measure, and the bytes per state row are those of a sketch-holding
// row (more than a count's).
func TestApproxCountDistinctStateCost(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := tiletest.WriteFiles(in, tiletest.Events(5, 3000, 150*time.Millisecond, 4*time.Minute, 13), 500); err != nil {
		t.Fatal(err)
	}
	spec := func(name string, approx bool) query.Spec {
		s := tiletest.Spec(in, filepath.Join(dir, name, "out"), filepath.Join(dir, name, "cp"))
		if approx {
			s.Aggregate.Measures = append(s.Aggregate.Measures, query.Measure{Name: "lessons", Fn: query.FnApproxCountDistinct, Column: "lesson_id"})
		}
		return s
	}
	plain := run(t, spec("plain", false), microbatch.Options{})
	approx := run(t, spec("approx", true), microbatch.Options{})
	if len(plain) != len(approx) {
		t.Fatalf("%d and %d batches", len(plain), len(approx))
	}
	for i, p := range approx {
		op, base := p.StateOperators[0], plain[i].StateOperators[0]
		if base.CustomMetrics != nil {
			t.Fatalf("a query without approx_count_distinct reports %v", base.CustomMetrics)
		}
		if op.NumRowsTotal != base.NumRowsTotal {
			t.Fatalf("batch %d: %d state rows with the sketch, %d without", p.BatchID, op.NumRowsTotal, base.NumRowsTotal)
		}
		if got := op.CustomMetrics["approxCountDistinctSketches"]; got != op.NumRowsTotal {
			t.Fatalf("batch %d: %d sketches for %d state rows", p.BatchID, got, op.NumRowsTotal)
		}
		if got := op.CustomMetrics["approxCountDistinctMaxBytes"]; got != op.NumRowsTotal*progress.HLLSketchMaxBytes {
			t.Fatalf("batch %d: max bytes %d", p.BatchID, got)
		}
		if op.NumRowsTotal > 0 && op.MemoryUsedBytes <= base.MemoryUsedBytes {
			t.Fatalf("batch %d: the sketches cost nothing: %d bytes with, %d without", p.BatchID, op.MemoryUsedBytes, base.MemoryUsedBytes)
		}
	}
}
